"""An interrupt held during a compiled call is raised when the call returns, once (session 39)."""

import pytest

from photonics.compiled_calls import compiled_call, hold_until_return


def test_outside_a_compiled_call_nothing_is_held():
    assert hold_until_return(KeyboardInterrupt()) is False


def test_an_interrupt_held_during_the_call_is_raised_after_it_and_only_once():
    first, second = KeyboardInterrupt("first"), KeyboardInterrupt("second")

    def compiled(x):
        assert hold_until_return(first)
        assert hold_until_return(second)  # the first one is kept
        return x + 1

    with pytest.raises(KeyboardInterrupt, match="first"):
        compiled_call(compiled, 1)
    assert compiled_call(lambda x: x * 2, 3) == 6  # nothing is left held for the next call


def test_nested_calls_raise_at_the_outermost_return():
    def inner():
        assert hold_until_return(KeyboardInterrupt("held"))
        return 1

    done = []

    def outer():
        done.append(compiled_call(inner))  # the inner return does not raise yet
        return 2

    with pytest.raises(KeyboardInterrupt, match="held"):
        compiled_call(outer)
    assert done == [1]


def test_the_interrupt_wins_over_an_error_of_the_call():
    def failing():
        hold_until_return(KeyboardInterrupt("held"))
        raise ValueError("the call's own error")

    with pytest.raises(KeyboardInterrupt, match="held") as caught:
        compiled_call(failing)
    assert isinstance(caught.value.__context__, ValueError)
    assert compiled_call(lambda: 0) == 0

"""Calls into numba-compiled code, during which a signal handler must not raise.

Numba's dispatcher boxes a compiled function's results by calling back into Python
(``numba.core.serialize._numba_unpickle``, for the dtype of each array it returns). A signal
handler that raises -- ``lumion``'s, which turns Ctrl-C and SIGTERM into an exception (see
``lab_scripts.interrupts``) -- runs at that callback's first instruction, and numba's C code
does not expect the callback to fail: the process crashed (segmentation fault), or the
interrupt came out as ``SystemError: CPUDispatcher(...) returned a result with an exception
set``, which ``lumion calibrate`` reported as an internal bug (exit 70) instead of an
interruption (130) when SIGTERM came during a fringe fit (session 39).

So a compiled function is called through :func:`compiled_call`, and a handler asks
:func:`hold_until_return` first: inside such a call the exception is kept, not raised, and
the call raises it as soon as numba has returned (a fit is a few hundred microseconds).
Only the main thread runs signal handlers, so only its calls are tracked; the depth is per
thread all the same, so a worker thread inside a compiled call never holds the main
thread's interrupt back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _Calls(threading.local):
    """The compiled calls in progress on this thread and the exception held for their return."""

    depth = 0
    held: BaseException | None = None


_CALLS = _Calls()


def compiled_call(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, a numba-compiled function; an interrupt held meanwhile is raised after."""
    calls = _CALLS
    calls.depth += 1
    try:
        return function(*args)
    finally:
        calls.depth -= 1
        held = calls.held if calls.depth == 0 else None
        if held is not None:  # the interrupt wins over the result, or over an error in flight
            calls.held = None
            raise held


def hold_until_return(exc: BaseException) -> bool:
    """Keep ``exc`` for the compiled call in progress to raise once it returns (True), or False
    when no compiled call is in progress on this thread (then raise it yourself). Of several,
    the first is kept.
    """
    calls = _CALLS
    if calls.depth == 0:
        return False
    if calls.held is None:
        calls.held = exc
    return True

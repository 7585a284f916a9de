"""Ctrl-C while ``python -m photonics.warm_kernels`` fits its fringe stops it cleanly.

Python's default SIGINT handler raises at the next bytecode; inside the fit's compiled call
that is numba's callback boxing the results, where an exception crashed the process or came
out as a SystemError (photonics.compiled_calls, session 39). The tool now holds the interrupt
until the compiled call returns, says what happened and exits 130.
"""

import os
import signal

from photonics import fringe_fit_kernels, warm_kernels


def test_ctrl_c_during_the_fringe_fit_is_raised_after_the_call_and_exits_130(monkeypatch, capsys):
    returned = []

    def fit_interrupted_inside(*args):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside the "compiled" call
        returned.append(len(args))  # still reached: the interrupt was held, not raised in the call
        return args

    monkeypatch.setattr(fringe_fit_kernels, "fringe_trf", fit_interrupted_inside)
    before = signal.getsignal(signal.SIGINT)
    assert warm_kernels.main() == warm_kernels.EXIT_INTERRUPTED
    assert returned == [17]  # the call ran to its end once; the second fit never started
    assert "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back

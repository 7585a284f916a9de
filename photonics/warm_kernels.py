"""Compile the circuit kernels for this machine once, before anything waits on them.

The first circuit solve on a fresh checkout compiles the merge kernels (and the first
gradient the gradient kernels) with numba: about 20 s of CPU, over a minute on a loaded
machine; the first calibration compiles the fringe fits' kernels (:func:`warm_fringe_fit`,
over a minute). Every later process loads the cached machine code. ``make test`` runs this first,
so that no test with a short timeout (a simulated instrument answering within 0.2 s) pays
the compile inside its timeout, and the install says what the wait is.

    python -m photonics.warm_kernels
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator

from photonics.compiled_calls import compiled_call, hold_until_return

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C (as lumion's own commands)


def _interrupt(signum: int, _frame: object) -> None:
    """Ctrl-C (or SIGTERM) raises KeyboardInterrupt, held while a compiled call is in progress.

    Python's default handler raises at the next bytecode, and inside the fringe fit's compiled
    call that is numba's callback boxing the results: the process crashed or printed a
    SystemError (photonics.compiled_calls) instead of stopping.
    """
    exc = KeyboardInterrupt(signal.Signals(signum).name)
    if hold_until_return(exc):
        return
    raise exc


@contextlib.contextmanager
def _interrupts_held_over_compiled_calls() -> Iterator[None]:
    """SIGINT and SIGTERM go through :func:`_interrupt` for the block, the previous handlers after."""
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main() -> int:
    """Warm every kernel; an interrupt stops it with one line and exit 130 (the rest compiles later)."""
    try:
        with _interrupts_held_over_compiled_calls():
            warm_all()
    except KeyboardInterrupt:
        print("== interrupted: the kernels compiled so far are cached; the next run (or the first "
              "solve) compiles the rest", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return 0


def warm_all() -> None:
    """Solve a small mesh once, take one gradient and fit one fringe; print how long the kernels took."""
    from photonics.circuit import solve
    from photonics.circuit_gradient import jacobian
    from photonics.kernel_loader import step_kernels
    from photonics.state import MeshState
    from photonics.topology import hexagonal

    t0 = time.perf_counter()
    print("== compiling the circuit kernels for this machine (once; cached after)", flush=True)
    mesh = hexagonal(1, 2)
    state = MeshState.uniform(mesh, "cross")
    solve(mesh, state)
    jacobian(mesh, state)
    step_kernels()  # a simulated chip's setting and reading steps (photonics.step_kernels)
    print(f"== circuit kernels ready ({time.perf_counter() - t0:.1f} s)", flush=True)
    t0 = time.perf_counter()
    print("== compiling the fringe fits' kernels (once; cached after)", flush=True)
    try:
        warm_fringe_fit()
    except Exception as exc:  # a changed signature: the first calibration compiles them instead
        print(f"== the fringe fits' kernels were not compiled here ({exc!r}); the first calibration "
              "compiles them", flush=True)
    else:
        print(f"== fringe fit kernels ready ({time.perf_counter() - t0:.1f} s)", flush=True)


def warm_fringe_fit() -> None:
    """One small fit through :func:`photonics.fringe_fit_kernels.fringe_trf` with the argument
    types ``calibration.fit.fringe_least_squares`` passes (float64 vectors, int64 columns,
    C-ordered (n, k) readings and weights), both losses: numba compiles (``cache=True``) the
    specialisation the calibrations then load. Without it the first calibration tests compiled
    it inside the suite, on both workers at once (2-3 min at load ~14, docs/testing.md).
    """
    import numpy as np

    from photonics.fringe_fit_kernels import fringe_trf

    current = np.linspace(0.0, 20.0, 24)
    signs = np.array([1.0, -1.0])
    amp_col = 3  # delta, then rho2 and rho3 of the one sweep, then an amplitude and a floor per output
    truth = np.array([0.3, 0.01, 1e-5, 1.0, 1.0, 0.05, 0.05])
    theta = truth[0] + truth[1] * current**2 + truth[2] * current**3
    power = truth[5:][None, :] + truth[3:5][None, :] * (1 + signs[None, :] * np.cos(theta)[:, None]) / 2
    weights = np.full_like(power, 100.0)
    x0 = np.array([0.0, 0.012, 0.0, 0.9, 0.9, 0.0, 0.0])
    lb, ub = np.full(7, -10.0), np.full(7, 10.0)
    for robust in (False, True):
        compiled_call(fringe_trf, x0, lb, ub, current**2, current**3, np.ones(24),
                      np.ones(24, dtype=np.int64), signs, np.ascontiguousarray(power), weights,
                      amp_col, robust, 1.0, 50, 1e-8, 1e-8, 1e-8)


if __name__ == "__main__":
    sys.exit(main())

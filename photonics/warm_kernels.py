"""Compile the circuit kernels for this machine once, before anything waits on them.

The first circuit solve on a fresh checkout compiles the merge kernels (and the first
gradient the gradient kernels) with numba: about 20 s of CPU, over a minute on a loaded
machine. Every later process loads the cached machine code. ``make test`` runs this first,
so that no test with a short timeout (a simulated instrument answering within 0.2 s) pays
the compile inside its timeout, and the install says what the wait is.

    python -m photonics.warm_kernels
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    """Solve a small mesh once and take one gradient; print how long the kernels took."""
    from photonics.circuit import solve
    from photonics.circuit_gradient import jacobian
    from photonics.state import MeshState
    from photonics.topology import hexagonal

    t0 = time.perf_counter()
    print("== compiling the circuit kernels for this machine (once; cached after)", flush=True)
    mesh = hexagonal(1, 2)
    state = MeshState.uniform(mesh, "cross")
    solve(mesh, state)
    jacobian(mesh, state)
    print(f"== circuit kernels ready ({time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

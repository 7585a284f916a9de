"""How the circuit merge lays its arena out: constants shared by the merge plan
(:mod:`photonics.circuit_merge`) and the compiled kernels that execute it
(:mod:`photonics.circuit_kernels`, loaded by :mod:`photonics.kernel_loader`).

A module of its own so that imports point one way: the plan imports the loader lazily, and
the loader and kernels take these numbers from here rather than from the plan.
"""

LEAF_SIZE = 16  # arena entries of a TBU's 4x4 scattering matrix (at 16 * tbu)
LANES = 8  # blocks merged side by side: each arena entry holds LANES real and LANES imaginary
# parts, so a complex multiply-add is a few SIMD instructions (AVX-512 holds 8 doubles, AVX2 4) and
# a merge's index arithmetic is paid once per LANES blocks. 8 lanes "measured no faster" than 4 on
# 2026-11-26 because LLVM's "prefer-256-bit" tuning for Skylake-X and later split them into two
# 256-bit halves; built without it (photonics.kernel_loader), the merge kernel at 1,000 wavelengths
# took 0.77x (smartlight) and 0.78x (hex:6x6) the time of the 4-lane build, and 0.87x / 0.91x
# compiled for AVX2 alone (session 41, benchmarks/bench_merge_lanes.py, Emerald Rapids, same bytes).
# Memory: smartlight's compact arena is 5,024 entries x 8 lanes x 16 B = 643 kB (hex:6x6 1.03 MB).

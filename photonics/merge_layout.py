"""How the circuit merge lays its arena out: constants shared by the merge plan
(:mod:`photonics.circuit_merge`) and the compiled kernels that execute it
(:mod:`photonics.circuit_kernels`, loaded by :mod:`photonics.kernel_loader`).

A module of its own so that imports point one way: the plan imports the loader lazily, and
the loader and kernels take these numbers from here rather than from the plan.
"""

LEAF_SIZE = 16  # arena entries of a TBU's 4x4 scattering matrix (at 16 * tbu)
LANES = 4  # blocks merged side by side: each arena entry holds LANES real and LANES imaginary
# parts, so a complex multiply-add is a few SIMD instructions (AVX2 holds 4 doubles) and a
# merge's index arithmetic is paid once per LANES blocks. 8 lanes measured no faster here.

"""Where our one-wavelength call loses its time right after SAX's call (issue 28's last target).

In `bench_circuit_vs_sax.py` the two sides' single calls alternate, so our 0.07 ms solve runs
right after SAX's 2 ms call, which has evicted what ours needs from the core's caches (code,
interpreter objects, data). This probe times our call (`PreparedSolve(mesh, params, 1550 nm)`
on smartlight, as the benchmark calls it) right after a SAX call each round, with one part of
our call warmed just before it (outside the timing), so the difference to "plain" is what that
part costs cold:

* plain: nothing warmed (the benchmark's case);
* python path: the whole Python and ctypes path of the call, run just before with the compiled
  kernel swapped for a C no-op (libc's ``labs``: it reads one integer argument and ignores the
  rest, as the x86-64 and AArch64 calling conventions allow);
* python path + kernel code: a whole solve of an 11-TBU mesh (hex:1x2) just before: the same
  Python path and the same compiled function, little of smartlight's data;
* python path + kernel code + data: that, and smartlight's 128 kB of arena, plan and chip
  arrays touched;
* in a row: the call right after itself.

And, as a floor for any Python call that returns a fresh numpy array from compiled code, the
same cold start of a bare ``np.empty`` of the output's shape, of a no-op ctypes call, and of the
two with a buffer export between them.

Run (needs the bench extra; SAX's first call compiles XLA for about a minute):
    taskset -c 1 python benchmarks/probe_cold_start.py --rounds 25
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=25, help="rounds (each variant once a round, shuffled)")
    ap.add_argument("--jax-cache", type=Path, default=Path.home() / ".cache" / "lumion-bench-jax",
                    help="JAX persistent compilation cache (as bench_circuit_vs_sax.py's)")
    return ap.parse_args()


def main() -> None:
    args = _args()
    from bench_circuit_vs_sax import _one_core

    _one_core(1)
    from sax_circuit import ensure_deep_thread_stacks

    ensure_deep_thread_stacks(args.jax_cache)  # before JAX loads: may re-execute this process
    import jax.numpy as jnp
    import numpy as np
    from bench_circuit_vs_sax import cpu_timed, make_mesh
    from sax_circuit import build_sax_lean, first_call, sax_table, use_compile_cache

    from photonics.circuit import PreparedSolve
    from photonics.circuit_merge import _solve_scratch, merge_plan
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import mesh_from_spec

    use_compile_cache(args.jax_cache)
    mesh = make_mesh("smartlight")
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    wl = np.array([1550.0])
    sax = build_sax_lean(mesh, params.center_wavelength_nm)
    table, wl_nm = jnp.asarray(sax_table(mesh, params, state)), jnp.asarray(wl)

    def run_sax():
        return sax(wl_nm, table).block_until_ready()

    first_call(run_sax, "smartlight at 1 wavelength", 3600.0, args.jax_cache)
    ours = PreparedSolve(mesh, params, wl)
    if ours._one is None:
        sys.exit("the one-block path is not available here (numba's dispatcher fallback): nothing to probe")
    labs = ctypes.CDLL(None).labs
    obj = ctypes.py_object
    shadow = PreparedSolve(mesh, params, wl)  # the same Python path, the kernel a no-op with its signature
    shadow._one = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, obj, obj, obj)(  # (labs of the packed
        ctypes.cast(labs, ctypes.c_void_p).value)  # array's address: not 0, "finite")
    tiny_mesh = mesh_from_spec("hex:1x2")
    tiny_params = fabricated_params(tiny_mesh.n_tbus, tiny_mesh.n_links, np.random.default_rng(1))
    tiny_state = MeshState.random(tiny_mesh, np.random.default_rng(1))
    tiny = PreparedSolve(tiny_mesh, tiny_params, wl)
    plan = merge_plan(mesh)
    data = [*_solve_scratch(plan, 1)[:5], plan.solve_merges, plan.pool, plan.solve_out_idx, state.phi_top,
            state.phi_bot, *(a for a in ours._chip.consts if isinstance(a, np.ndarray))]

    def touch() -> None:
        for a in data:
            a.view(np.uint8)[::64].sum()

    shape, c128 = ours._shape, np.dtype(complex)
    address, as_chars = ctypes.addressof, ctypes.c_char.from_buffer

    def empty_export_noop():
        out = np.empty(shape, c128)
        labs(address(as_chars(out)))
        return out

    ours_calls = {  # name: what runs just before our call (outside the timing)
        "plain": lambda: None,
        "python path": lambda: shadow(state),
        "python path + kernel code": lambda: tiny(tiny_state),
        "python path + kernel code + data": lambda: (tiny(tiny_state), touch()),
    }
    floors = {"np.empty of the output": lambda: np.empty(shape, c128), "no-op ctypes call": lambda: labs(1),
              "np.empty + buffer export + no-op call": empty_export_noop}
    ours(state), shadow(state), tiny(tiny_state)  # warm: kernels loaded, arenas made
    for fn in floors.values():
        fn()
    cold: dict[str, list[float]] = {k: [] for k in (*ours_calls, *floors)}
    again: dict[str, list[float]] = {k: [] for k in ("plain", *floors)}  # right after itself
    names = list(cold)
    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start; "
          f"{args.rounds} rounds", flush=True)
    for _ in range(args.rounds):
        random.shuffle(names)
        for name in names:
            fn = floors.get(name) or (lambda: ours(state))
            cpu_timed(run_sax, settle=True)
            if name in ours_calls:
                ours_calls[name]()
            cold[name].append(cpu_timed(fn)[0])
            if name in again:
                again[name].append(cpu_timed(fn)[0])
    print("| after SAX's call, warmed just before | best (us) | median (us) | after itself: best (us) |")
    print("|---|---|---|---|")
    for name in (*ours_calls, *floors):
        c = np.array(cold[name]) * 1e6
        w = f"{min(again[name]) * 1e6:.1f}" if name in again else ""
        what = f"our call, {name}" if name in ours_calls else name
        print(f"| {what} | {c.min():.1f} | {np.median(c):.1f} | {w} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

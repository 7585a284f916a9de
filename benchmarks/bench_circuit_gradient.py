"""Value + gradient against value alone, ours and SAX's jax.grad, per core, in one run.

Same circuits and settings as bench_circuit_vs_sax.py (sax_circuit.build_sax_lean: one
jitted function of the wavelengths and an (n_tbus, 11) settings table), seeded fabricated
chips, one random state. The objective is a weighted sum of port powers over the
wavelengths, ``sum w[p, q] |Y[p, q]|^2``, over every output and either the first 6 inputs
(a 6-port synthesis target) or every input (the whole port matrix); its gradient is over
every heater phase (2 per TBU).

* ours, value: photonics.circuit.solve (the production merge) + the objective;
* ours, value + gradient: photonics.circuit_gradient.value_and_grad (the merge with its
  eliminations kept, then one reverse pass down the tree: "waves", lighting the inputs and the
  cotangent-weighted outputs, or "nodes", every node's cotangent, whichever counts fewer
  multiply-adds: column "pass");
* SAX: jax.jit of the objective, and jax.jit(jax.value_and_grad(objective)) over the
  table's two heater columns; first calls (trace + compile) reported apart.

One core for both (pinned, single-threaded BLAS and XLA, as bench_circuit_vs_sax.py), CPU time
of the process, best of --repeats, calls alternated. "agree" is the largest difference of our
gradient from SAX's over its largest entry.

Run:
    python benchmarks/bench_circuit_gradient.py
    python benchmarks/bench_circuit_gradient.py --meshes square:6x6 --wavelengths 1 --no-sax
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_circuit_vs_sax import _one_core, cpu_timed


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wavelengths", default="1,64")
    ap.add_argument("--meshes", default="smartlight,square:6x6")
    ap.add_argument("--no-sax", action="store_true", help="ours only")
    ap.add_argument("--sax-wavelengths", default="1",
                    help="sweep sizes SAX also runs (each is a fresh XLA compile of minutes)")
    return ap.parse_args()


def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t, out = cpu_timed(fn)
        best = min(best, t)
    return best, out


def main() -> None:
    args = _args()
    _one_core(args.cores)
    import numpy as np

    from photonics.circuit import solve
    from photonics.circuit_gradient import by_cotangent, gradient_plan, value_and_grad
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import mesh_from_spec

    print("| mesh | wavelengths | inputs | pass | ours value (ms) | ours value+grad (ms) | ratio "
          "| SAX value (ms) | SAX value+grad (ms) | SAX ratio | SAX grad first call (s) "
          "| SAX v+g / ours v+g | agree |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.meshes.split(","):
        mesh = mesh_from_spec(name)
        rng = np.random.default_rng(2024)
        params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
        state = MeshState.random(mesh, rng)
        sax_fns = None if args.no_sax else _sax(mesh, params, state)
        for n_wl in (int(v) for v in args.wavelengths.split(",")):
            wl = np.linspace(1540.0, 1560.0, n_wl)
            for n_in in (6, mesh.n_ports):
                ins = np.arange(n_in)
                w = np.linspace(0.2, 1.0, mesh.n_ports)[:, None] * np.linspace(1.0, 0.5, n_in)[None, :]

                def objective(Y, w=w):
                    return (w * np.abs(Y) ** 2).sum(axis=(1, 2, 3)), 2 * w * np.conj(Y)

                def ours_value(wl=wl, ins=ins, objective=objective, m=mesh, st=state, pa=params):
                    return objective(solve(m, st, wl, pa, inputs=ins))[0]

                def ours_grad(wl=wl, ins=ins, objective=objective, m=mesh, st=state, pa=params):
                    return value_and_grad(m, st, objective, wl, pa, inputs=ins)

                ours_grad()
                ours_value()
                tv, _ = _best(ours_value, args.repeats)
                tg, (_, g) = _best(ours_grad, args.repeats)
                reverse = "nodes" if by_cotangent(gradient_plan(mesh), n_in) else "waves"
                row = (f"| {name} | {n_wl} | {n_in} | {reverse} | {tv * 1e3:.2f} | {tg * 1e3:.2f} "
                       f"| {tg / tv:.1f}x ")
                if sax_fns is None or str(n_wl) not in args.sax_wavelengths.split(","):
                    print(row + "| - | - | - | - | - | - |")
                    continue
                sv, sg, first, sax_g = sax_fns(wl, ins, w, args.repeats)
                agree = float(np.abs(sax_g - g[0]).max() / np.abs(g).max())
                print(row + f"| {sv * 1e3:.2f} | {sg * 1e3:.2f} | {sg / sv:.1f}x | {first:.1f} "
                      f"| {sg / tg:.1f}x | {agree:.1e} |")
                sys.stdout.flush()


def _sax(mesh, params, state):
    """A function timing SAX's value and jax.value_and_grad of the same objective; the two
    jitted functions take the weights over every port as an argument, so each compiles once
    per wavelength count (minutes for smartlight: XLA's compile of the unrolled circuit).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from sax_circuit import build_sax_lean, sax_table

    run = build_sax_lean(mesh, params.center_wavelength_nm).__wrapped__
    table0 = jnp.asarray(sax_table(mesh, params, state))

    def loss(heat, wl_um, w_all):
        Y = run(wl_um, table0.at[:, :2].set(heat))
        return jnp.sum(w_all * jnp.abs(Y) ** 2)

    value, vg = jax.jit(loss), jax.jit(jax.value_and_grad(loss))

    def timed(wl, ins, w, repeats):
        wl_um = jnp.asarray(wl * 1e-3)
        w_all = np.zeros((mesh.n_ports, mesh.n_ports))
        w_all[:, ins] = w
        w_all = jnp.asarray(w_all)
        heat = table0[:, :2]
        value(heat, wl_um, w_all).block_until_ready()
        t = time.perf_counter()
        jax.block_until_ready(vg(heat, wl_um, w_all))
        first = time.perf_counter() - t
        sv, _ = _best(lambda: value(heat, wl_um, w_all).block_until_ready(), repeats)
        sg, (_, g) = _best(lambda: jax.block_until_ready(vg(heat, wl_um, w_all)), repeats)
        return sv, sg, first, np.asarray(g)

    return timed


if __name__ == "__main__":
    main()

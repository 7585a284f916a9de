"""Value + gradient against value alone, ours and SAX's jax.grad, per core, in one run.

Same circuits and settings as bench_circuit_vs_sax.py (one jitted function of the
wavelengths and an (n_tbus, 11) settings table; by default sax_circuit.build_sax_vectorized,
the TBU model evaluated once for every TBU and joined by SAX's own backend, whose gradient
XLA compiles in about a minute; --sax-build lean is build_sax_lean, one model call per
instance through sax.circuit), seeded fabricated chips, one random state. The objective is a
weighted sum of port powers over the wavelengths, ``sum w[p, q] |Y[p, q]|^2``, over every
output and either the first 6 inputs (a 6-port synthesis target) or every input (the whole
port matrix); its gradient is over every heater phase (2 per TBU).

* ours, value: photonics.circuit.solve (the production merge) + the objective;
* ours, value + gradient: photonics.circuit_gradient.value_and_grad (the merge with its
  eliminations kept, then one reverse pass down the tree: "waves", lighting the inputs and the
  cotangent-weighted outputs, or "nodes", every node's cotangent, whichever counts fewer
  multiply-adds: column "pass");
* SAX: jax.jit of the objective, and jax.jit(jax.value_and_grad(objective)) over the
  table's two heater columns; each compile reported apart on a "# SAX ..." line (trace and
  lower, then XLA's compile, CPU and wall seconds), under a watchdog (--sax-timeout).

One core for both (pinned, single-threaded BLAS and XLA, as bench_circuit_vs_sax.py), CPU time
of the process, best of --repeats, calls alternated. "agree" is the largest difference of our
gradient from SAX's over its largest entry.

Run:
    python benchmarks/bench_circuit_gradient.py --wavelengths 1,64 --sax-wavelengths 1,64
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
                    help="sweep sizes SAX also runs (each is a fresh XLA compile)")
    ap.add_argument("--sax-build", choices=("vectorized", "lean"), default="vectorized",
                    help="SAX circuit: the TBU model once for every TBU (sax_circuit.build_sax_vectorized) "
                         "or once per instance through sax.circuit (build_sax_lean: XLA's compile of "
                         "its value_and_grad did not finish in 93 min on smartlight)")
    ap.add_argument("--sax-backend", default="klu", help="SAX backend (klu, filipsson_gunnar)")
    ap.add_argument("--sax-timeout", type=float, default=3600.0,
                    help="seconds of wall clock after which a SAX step still running stops the run")
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
          "| SAX value (ms) | SAX value+grad (ms) | SAX ratio | SAX v+g / ours v+g | agree |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.meshes.split(","):
        mesh = mesh_from_spec(name)
        rng = np.random.default_rng(2024)
        params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
        state = MeshState.random(mesh, rng)
        sax_fns = None if args.no_sax else _sax(mesh, name, params, state, args)
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
                    print(row + "| - | - | - | - | - |")
                    continue
                sv, sg, sax_g = sax_fns(wl, ins, w, args.repeats)
                agree = float(np.abs(sax_g - g[0]).max() / np.abs(g).max())
                print(row + f"| {sv * 1e3:.2f} | {sg * 1e3:.2f} | {sg / sv:.1f}x "
                      f"| {sg / tg:.1f}x | {agree:.1e} |")
                sys.stdout.flush()


def _sax(mesh, name, params, state, args):
    """A function timing SAX's value and jax.value_and_grad of the same objective; the two
    jitted functions take the weights over every port as an argument, so each compiles once
    per wavelength count. Each compile is timed on its own (jax's ahead-of-time steps: trace
    and lower, then XLA's compile; CPU and wall seconds) and printed as a line of its own
    before the table row; a watchdog prints the running step every minute and stops the run
    after ``--sax-timeout`` seconds (XLA's compile of ``build_sax_lean``'s gradient ran for
    hours), so the run cannot hang.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from sax_circuit import build_sax_lean, build_sax_vectorized, sax_table

    build = build_sax_vectorized if args.sax_build == "vectorized" else build_sax_lean
    run = build(mesh, params.center_wavelength_nm, args.sax_backend).__wrapped__
    table0 = jnp.asarray(sax_table(mesh, params, state))

    def loss(heat, wl_nm, w_all):
        Y = run(wl_nm, table0.at[:, :2].set(heat))
        return jnp.sum(w_all * jnp.abs(Y) ** 2)

    compiled: dict = {}

    def compile_for(n_wl, *example):
        if n_wl not in compiled:
            compiled[n_wl] = tuple(_compiled(fn, example, f"{name} {n_wl} wl {label}", args)
                                   for fn, label in ((loss, "value"),
                                                     (jax.value_and_grad(loss), "value_and_grad")))
        return compiled[n_wl]

    def timed(wl, ins, w, repeats):
        wl_nm = jnp.asarray(wl)
        w_all = np.zeros((mesh.n_ports, mesh.n_ports))
        w_all[:, ins] = w
        w_all = jnp.asarray(w_all)
        heat = table0[:, :2]
        value, vg = compile_for(len(wl), heat, wl_nm, w_all)
        sv, _ = _best(lambda: value(heat, wl_nm, w_all).block_until_ready(), repeats)
        sg, (_, g) = _best(lambda: jax.block_until_ready(vg(heat, wl_nm, w_all)), repeats)
        return sv, sg, np.asarray(g)

    return timed


def _compiled(fn, example: tuple, what: str, args):
    """``fn`` jitted and compiled for ``example``, each step timed and printed, under a
    watchdog (see :func:`_sax`)."""
    import os
    import threading

    import jax

    step = {"name": f"SAX {args.sax_build}/{args.sax_backend} {what}: trace and lower", "t0": time.time()}
    start = time.time()

    def watch() -> None:
        while not done.wait(60.0):
            waited = time.time() - start
            print(f"# ... {step['name']} still running after {time.time() - step['t0']:.0f} s", flush=True)
            if waited > args.sax_timeout:
                print(f"# STOPPED: {step['name']} not finished within --sax-timeout {args.sax_timeout:.0f} s "
                      "of wall clock", flush=True)
                os._exit(3)

    done = threading.Event()
    threading.Thread(target=watch, daemon=True).start()
    try:
        c, w = time.process_time(), time.time()
        lowered = jax.jit(fn).lower(*example)
        c1, w1 = time.process_time(), time.time()
        step.update(name=f"SAX {args.sax_build}/{args.sax_backend} {what}: XLA compile", t0=w1)
        out = lowered.compile()
        c2, w2 = time.process_time(), time.time()
    finally:
        done.set()
    print(f"# SAX {args.sax_build}/{args.sax_backend} {what}: trace+lower {c1 - c:.1f} s CPU "
          f"({w1 - w:.1f} s wall), XLA compile {c2 - c1:.1f} s CPU ({w2 - w1:.1f} s wall)", flush=True)
    return out


if __name__ == "__main__":
    main()

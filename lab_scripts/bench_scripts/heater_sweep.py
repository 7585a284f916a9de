"""Sweep one heater and plot the output power at the ports that respond (a fringe).

python -m lab_scripts.bench_scripts.heater_sweep --input 3 --plot sweep.png
python -m lab_scripts.bench_scripts.heater_sweep --bench mybench.toml --channel 12
"""

from __future__ import annotations

import argparse

import numpy as np

from instruments.config import open_bench
from photonics.atomic import save_figure


def main(argv: list[str] | None = None) -> int:
    """Sweep, print the two ports that swing most, optionally plot."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="bench config TOML (default: the simulated bench)")
    p.add_argument("--input", default="3", help="mesh port the laser feeds")
    p.add_argument("--channel", type=int, help="heater channel (default: top arm of the input's TBU)")
    p.add_argument("--max-ma", type=float, default=4.0, help="sweep 0..MAX mA")
    p.add_argument("--steps", type=int, default=41)
    p.add_argument("--plot", metavar="FILE.png")
    args = p.parse_args(argv)
    with open_bench(args.bench) as bench:
        mesh = bench.mesh
        port = mesh.port_index(int(args.input) if args.input.isdigit() else args.input)
        ch = args.channel if args.channel is not None else 2 * int(mesh.port_tbu_ports[port] // 4)
        bench.select_input(port)
        base = bench.currents()
        sweep = np.linspace(0, args.max_ma, args.steps)
        powers = []
        for i in sweep:
            c = base.copy()
            c[ch] = i
            bench.set_currents(c)
            powers.append(bench.read_powers_dbm(range(mesh.n_ports)))
        bench.set_currents(base)
    powers = np.array(powers)
    swing = powers.max(0) - powers.min(0)
    top = np.argsort(-np.where(powers.max(0) > -50, swing, 0))[:2]
    print(f"heater:{ch}, light into {mesh.port_names[port]}, 0..{args.max_ma} mA:")
    for k in top:
        print(f"  {mesh.port_names[k]}: {powers[:, k].min():6.1f} .. {powers[:, k].max():6.1f} dBm")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for k in top:
            ax.plot(sweep, powers[:, k], label=mesh.port_names[k])
        ax.set(xlabel=f"heater:{ch} current (mA)", ylabel="power (dBm)", title="heater sweep")
        ax.legend()
        fig.tight_layout()
        save_figure(fig, args.plot, dpi=120)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

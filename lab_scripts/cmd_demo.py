"""``lumion demo``: the end-to-end story on the simulated bench.

Today it shows the physics foundation: the SmartLight-size mesh, and one hexagonal cell
programmed as a ring resonator whose spectrum is solved and plotted. The fabric work
extends it to calibrate, route a ring of accelerators, fail one and recover.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lab_scripts.common import add_json_flag, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser("demo", help="run the end-to-end demo on the simulated bench",
                       description="Example: lumion demo --out lumion-demo")
    p.add_argument("--out", default="lumion-demo", help="folder for the plots (created)")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print a short report."""
    import numpy as np

    from lab_scripts.plots import spectrum
    from photonics.circuit import power_db, solve
    from photonics.physics import C_UM_PER_PS, PhysicsDefaults, nominal_params, split_phases
    from photonics.state import MeshState
    from photonics.topology import hexagonal, smartlight

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chip = smartlight()
    d = PhysicsDefaults()

    ring = hexagonal(1, 1)
    top, bot = split_phases(np.array([0.3, 0, 0, 0, 0, 0]))
    f = np.linspace(193.40, 193.46, 1201)
    wl = C_UM_PER_PS / f * 1e3
    inp = int(np.flatnonzero(ring.port_tbu_ports == 0)[0])
    thru = int(np.flatnonzero(ring.port_tbu_ports == 2)[0])
    S = solve(ring, MeshState(top, bot), wl, nominal_params(ring.n_tbus, ring.n_links, d),
              inputs=[inp])[0, :, :, 0]
    p = power_db(S).T
    dips = np.flatnonzero((p[thru, 1:-1] < p[thru, :-2]) & (p[thru, 1:-1] < p[thru, 2:])) + 1
    fsr_ghz = float(np.diff(f[dips]).mean() * 1e3) if len(dips) > 1 else float("nan")
    plot = spectrum(out / "ring_spectrum.png", wl,
                    {ring.port_names[k]: p[k] for k in range(ring.n_ports)},
                    "one hexagonal cell as a ring resonator (TBU 0 couples 30 %)")
    report = {
        "mesh": {"name": "smartlight", "n_tbus": chip.n_tbus, "n_ports": chip.n_ports,
                 "n_heaters": chip.n_heaters},
        "ring": {"fsr_ghz": fsr_ghz, "expected_fsr_ghz": 1e3 / (6 * d.basic_unit_delay_ps),
                 "extinction_db": float(p[thru].max() - p[thru].min())},
        "plots": [str(plot)],
    }
    if args.json:
        print_json(report)
        return 0
    print(f"smartlight mesh: {chip.n_tbus} TBUs, {chip.n_ports} ports, {chip.n_heaters} heaters")
    print(f"hexagonal ring resonator: FSR {fsr_ghz:.2f} GHz "
          f"(expected {report['ring']['expected_fsr_ghz']:.2f} GHz from 6 x "
          f"{d.basic_unit_delay_ps} ps), notch depth {report['ring']['extinction_db']:.1f} dB")
    print(f"wrote {plot}")
    return 0

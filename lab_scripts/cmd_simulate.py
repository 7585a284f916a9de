"""``lumion simulate``: output power per port for light into one mesh port."""

from __future__ import annotations

import argparse

from lab_scripts.common import (
    add_json_flag,
    load_configuration,
    load_mesh,
    mesh_spec,
    print_json,
    seed,
    table,
    wavelength_range,
)
from lab_scripts.errors import reading
from lab_scripts.paths import PLOT_SUFFIXES, output_file

# One solve of the smartlight mesh holds about 40 x 40 complex amplitudes per wavelength;
# 20,000 wavelengths keep a run's memory and time bounded (a 0.1 pm grid over 2 nm).
MAX_WAVELENGTHS = 20_000


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "simulate",
        help="circuit-solve a mesh state and print output power per port",
        description="Output power per port (dB) for light into one port. Example: "
        "lumion simulate --mesh smartlight --all bar --input port:3 "
        "--wavelengths 1549:1551:201 --plot spectrum.png",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--state", metavar="STATE.json", help="heater phases per TBU (lumion.state)")
    which.add_argument("--configuration", metavar="FILE.json",
                       help="lumion.configuration JSON or lumion route --json output, realised with the "
                       "chip's true phase offsets (a perfect calibration); refused if made for another mesh")
    which.add_argument("--all", choices=["bar", "cross"], help="every TBU in one state")
    p.add_argument("--input", required=True, help="input port: port:N or N")
    p.add_argument("--wavelengths", default="1550", help="START:STOP:N in nm, or one wavelength")
    p.add_argument("--fabricated", type=seed, metavar="SEED",
                   help="simulate a chip with seeded fabrication errors instead of ideal TBUs")
    p.add_argument("--plot", metavar="FILE.png", help="write the spectrum plot")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Solve and report."""
    import numpy as np

    from photonics.circuit import power_db, solve
    from photonics.physics import fabricated_params, nominal_params
    from photonics.state import MeshState
    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    wl = wavelength_range(args.wavelengths, MAX_WAVELENGTHS)
    mesh = load_mesh(args.mesh)
    conf = load_configuration(args.configuration, mesh) if args.configuration else None
    src = mesh.port_index(args.input)
    if args.fabricated is not None:
        params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(args.fabricated))
    else:
        params = nominal_params(mesh.n_tbus, mesh.n_links)
    if args.state:
        with reading("state file", args.state):
            state = MeshState.load(args.state, mesh)
    elif conf is not None:
        state = conf.heater_state(params.offset_top, params.offset_bot)
    else:
        state = MeshState.uniform(mesh, args.all)
    chunks = [solve(mesh, state, wl[i:i + 500], params, inputs=[src])[0, :, :, 0]
              for i in range(0, len(wl), 500)]
    p_db = power_db(np.concatenate(chunks, axis=0)).T  # (n_ports, n_wl)
    outputs = {name: p_db[k] for k, name in enumerate(mesh.port_names)}
    total = 10 * np.log10(np.maximum((10 ** (p_db / 10)).sum(0), 1e-300))
    if plot:
        from lab_scripts.plots import spectrum

        spectrum(plot, wl, outputs, f"{args.mesh}: light into {mesh.port_names[src]}")
    if args.json:
        print_json({"mesh": mesh_spec(mesh, args.mesh), "input": mesh.port_names[src], "wavelengths_nm": wl,
                    "outputs_db": outputs, "total_db": total, "plot": str(plot) if plot else None})
        return 0
    order = np.argsort(-p_db.max(axis=1))
    rows = [(mesh.port_names[k], p_db[k].min(), p_db[k].mean(), p_db[k].max())
            for k in order if p_db[k].max() > -60]
    span = f"{wl[0]:.3f} nm" if len(wl) == 1 else f"{wl[0]:.3f}-{wl[-1]:.3f} nm, {len(wl)} points"
    print(f"light into {mesh.port_names[src]} of {args.mesh} ({span}); ports above -60 dB:")
    print(table(rows, ["port", "min dB", "mean dB", "max dB"]))
    print(f"total output: {total.max():.2f} dB (max over the band)")
    if plot:
        print(f"wrote {plot}")
    return 0

"""``lumion layout``: draw the mesh as a GDS (gdsfactory) with its pad map and a PNG."""

from __future__ import annotations

import argparse

from lab_scripts.common import add_json_flag, load_mesh, mesh_spec, print_json
from lab_scripts.paths import GDS_SUFFIXES, PNG_SUFFIXES, output_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "layout",
        help="draw the mesh as a GDS with heater pads and a pad map",
        description="Draw a mesh chip (brick-wall MZI mesh, grating couplers, heater pads). "
        "Example: lumion layout --mesh smartlight --out chip.gds --png chip.png --json",
    )
    p.add_argument("--mesh", default="smartlight", help="smartlight | hex:RxC | FILE.json (hexagonal)")
    p.add_argument("--out", required=True, metavar="FILE.gds", help="GDS file to write; the pad map "
                   "goes next to it as FILE.pads.csv and FILE.pads.json")
    p.add_argument("--png", metavar="FILE.png", help="also write a picture of the layout (and FILE-tbu.png, "
                   "one TBU zoomed)")
    p.add_argument("--fiber-io", choices=("ring", "grating-edge", "edge-coupler"), default="ring",
                   help="couplers on all four sides (ring), or every port on one west column at the "
                   "127 µm fibre-array pitch: grating couplers or edge couplers at a facet")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Build and write the layout, print a summary."""
    from layouts.export import write_layout

    out = output_file(args.out, "--out", GDS_SUFFIXES)
    png = output_file(args.png, "--png", PNG_SUFFIXES) if args.png is not None else None
    mesh = load_mesh(args.mesh)  # a bad mesh file is named as such, before gdsfactory starts
    summary = write_layout(args.mesh, out, png=png, fiber_io=args.fiber_io)
    # one naming for every command: the picture is the `plot`, the mesh its --mesh name
    picture = summary.pop("png")
    summary = {**summary, "mesh": mesh_spec(mesh, args.mesh), "plot": picture, "fiber_io": args.fiber_io}
    if args.json:
        print_json(summary)
        return 0
    w, h = summary["size_um"]
    print(f"{summary['mesh']}: {summary['n_tbus']} TBUs, {summary['n_ports']} ports, "
          f"{summary['n_pads']} pads ({summary['n_heater_pads']} heaters), "
          f"{w / 1000:.2f} x {h / 1000:.2f} mm")
    print(f"heater lines up to {summary['max_line_resistance_ohm']:.1f} Ohm "
          f"({summary['wire_width_um']:g} µm wires), shared ground drop "
          f"{summary['max_ground_drop_v']:.2f} V ({summary['ground_width_um']:g} µm)")
    print(f"wrote {summary['gds']} ({summary['gds_bytes'] / 1e3:.0f} kB), pad map {summary['pad_map']} "
          f"and {summary['pad_map_json']}"
          + (f", pictures {summary['plot']} and {summary['plot_tbu']} (one TBU zoomed)"
             if summary["plot"] else ""))
    return 0

"""``lumion mesh``: counts and names of a mesh topology."""

from __future__ import annotations

import argparse

from lab_scripts.common import add_json_flag, print_json, table


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "mesh",
        help="show a mesh's TBUs, ports and heaters",
        description="Counts and names of a mesh. Example: lumion mesh --mesh hex:3x6 --json",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    p.add_argument("--save", metavar="FILE.json", help="also write the topology as JSON")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the mesh summary."""
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(args.mesh)
    if args.save:
        mesh.save(args.save)
    summary = mesh.summary()
    if args.json:
        print_json(summary)
        return 0
    print(f"{mesh.kind} mesh {mesh.rows} x {mesh.cols}: {mesh.n_tbus} TBUs, "
          f"{mesh.n_ports} ports, {mesh.n_heaters} heaters, {mesh.n_links} links")
    rows = [(name, 2 * i, 2 * i + 1) for i, name in enumerate(mesh.tbu_names)]
    print(table(rows, ["tbu", "heater top", "heater bot"]))
    print("ports (clockwise from west): " + ", ".join(mesh.port_names))
    if args.save:
        print(f"wrote {args.save}")
    return 0

"""``lumion mesh``: counts and names of a mesh topology."""

from __future__ import annotations

import argparse
from typing import Any

from lab_scripts.common import add_json_flag, load_mesh, print_json, table
from lab_scripts.paths import JSON_SUFFIXES, output_file

# What `mesh --json` prints without --full: enough to name ports and check a file's mesh.
SUMMARY_KEYS = ("mesh", "mesh_fingerprint", "kind", "rows", "cols", "n_tbus", "n_ports", "n_heaters",
                "n_links", "ports")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "mesh",
        help="show a mesh's TBUs, ports and heaters",
        description="Counts and names of a mesh. --json prints a summary (counts, fingerprint, port "
        "names); --json --full adds every TBU, heater channel, link and drawing coordinate. "
        "Example: lumion mesh --mesh hex:3x6 --json",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    p.add_argument("--save", metavar="FILE.json", help="also write the topology as JSON")
    p.add_argument("--full", action="store_true",
                   help="with --json: also every TBU, heater channel, link, port side and drawing "
                   "coordinate (smartlight: ~2,000 lines; the summary is ~60)")
    add_json_flag(p)
    p.set_defaults(run=run)


def drawing(mesh: Any) -> dict[str, Any]:
    """What a dashboard needs to draw the mesh, with the names the rest of LUMION uses.

    ``links``: every waveguide link, from one TBU port (``tbu:R.C.K/b1``: the TBU and its
    port side a0, a1, b0, b1) to another; ``port_sides``: the TBU port each mesh port enters
    at; ``geometry``: each TBU's two ends (a, b) in TBU lengths, x east and y north.
    """
    ends = mesh.tbu_xy.round(9)
    return {
        "links": [{"from": mesh.tbu_port_name(int(p)), "to": mesh.tbu_port_name(int(q))}
                  for p, q in mesh.links],
        "port_sides": {name: mesh.tbu_port_name(int(g))
                       for name, g in zip(mesh.port_names, mesh.port_tbu_ports, strict=True)},
        "geometry": {"unit": "tbu_length",
                     "tbus": {name: {"a": ends[i, 0].tolist(), "b": ends[i, 1].tolist()}
                              for i, name in enumerate(mesh.tbu_names)}},
    }


def run(args: argparse.Namespace) -> int:
    """Print the mesh summary."""
    save = output_file(args.save, "--save", JSON_SUFFIXES) if args.save is not None else None
    mesh = load_mesh(args.mesh)
    if save:
        mesh.save(save)
    from photonics.configuration import mesh_fingerprint, mesh_label

    summary = {"mesh": mesh_label(mesh), "mesh_fingerprint": mesh_fingerprint(mesh), **mesh.summary(),
               **drawing(mesh), "full": True}
    if args.json:
        print_json(summary if args.full else {key: summary[key] for key in SUMMARY_KEYS} | {"full": False})
        return 0
    print(f"{mesh.kind} mesh {mesh.rows} x {mesh.cols}: {mesh.n_tbus} TBUs, "
          f"{mesh.n_ports} ports, {mesh.n_heaters} heaters, {mesh.n_links} links; "
          f"{summary['mesh']}, fingerprint {summary['mesh_fingerprint']}")
    rows = [(name, 2 * i, 2 * i + 1) for i, name in enumerate(mesh.tbu_names)]
    print(table(rows, ["tbu", "heater top", "heater bot"]))
    print("ports (clockwise from west): " + ", ".join(mesh.port_names))
    if save:
        print(f"wrote {save}")
    return 0

"""``lumion route``: conflict-free routes between mesh ports, verified by the circuit solve."""

from __future__ import annotations

import argparse
from typing import Any

from lab_scripts.common import UsageError, add_json_flag, load_mesh, mesh_spec, print_json, seed, table
from lab_scripts.errors import CliError, explain
from lab_scripts.paths import PLOT_SUFFIXES, output_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "route",
        help="route port-to-port connections through the mesh (conflict-free, verified)",
        description="Plan conflict-free routes, park unused TBUs, and check every route with "
        "the circuit solve and the link budget. Example: lumion route --mesh smartlight "
        "--connect port:5:port:28 --connect 6:27 --failed tbu:0.2.3=dead --plot routes.png",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    p.add_argument("--connect", action="append", required=True, metavar="A:B",
                   help="source:destination, ports by number (3) or name (port:3); repeat")
    p.add_argument("--failed", action="append", default=[], metavar="TBU=dead|bar|cross",
                   help="a failed TBU (name or index): dead, or stuck in bar or cross; repeat")
    p.add_argument("--map", metavar="MAP.json",
                   help="calibration map: the TBUs it records as failed or unverified are avoided as with "
                   "--failed")
    p.add_argument("--trust-unverified", action="store_true",
                   help="with --map: route through TBUs the map records as unverified (light disagreed "
                   "with their fit; avoided by default)")
    p.add_argument("--reserved", action="append", default=[], metavar="TBU",
                   help="a TBU to avoid unless needed (costs 10 dB extra); repeat")
    p.add_argument("--exact", action="store_true",
                   help="solve the integer program: optimal routes, or a proof there are none")
    p.add_argument("--worst", action="store_true",
                   help="with --exact, minimise the worst route's loss instead of the total")
    p.add_argument("--transceiver", default="dwdm-10g-zr", metavar="NAME",
                   help="lane profile for the link budget (C band: dwdm-10g-zr, dwdm-10g-er; "
                        "sr-100g and er4lite-100g are refused: outside the chip's band)")
    p.add_argument("--fabricated", type=seed, metavar="SEED",
                   help="verify on a chip with seeded fabrication errors instead of ideal TBUs")
    p.add_argument("--plot", metavar="FILE.png", help="draw the mesh with the routes")
    add_json_flag(p)
    p.set_defaults(run=run)


def parse_connection(text: str) -> tuple[str, str]:
    """``A:B`` with A, B as ``N`` or ``port:N`` -> (A, B) strings for ``Mesh.port_index``."""
    parts = text.strip().split(":")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3:  # one side named: port:3:7 or 3:port:7
        return (f"{parts[0]}:{parts[1]}", parts[2]) if not parts[0].isdigit() else \
            (parts[0], f"{parts[1]}:{parts[2]}")
    if len(parts) == 4:
        return f"{parts[0]}:{parts[1]}", f"{parts[2]}:{parts[3]}"
    raise UsageError(f"--connect takes SOURCE:DESTINATION (e.g. 3:20 or port:3:port:20), not {text!r}")


def check_ports(mesh: Any, pairs: list[tuple[str, str]]) -> None:
    """Every port exists (an ``input`` error otherwise) and is used once (a ``usage`` error)."""
    seen: dict[int, str] = {}
    for pair in pairs:
        ends = [mesh.port_index(int(name) if name.isdigit() else name) for name in pair]
        if ends[0] == ends[1]:
            raise UsageError(f"--connect {':'.join(pair)} joins {mesh.port_names[ends[0]]} to itself; "
                             "a route runs between two different ports")
        for index in ends:
            if index in seen:
                raise UsageError(f"--connect: port {mesh.port_names[index]} used twice "
                                 f"({seen[index]} and {':'.join(pair)}); each port carries one route")
            seen[index] = ":".join(pair)


def parse_failed(items: list[str]) -> dict[str, str]:
    """``TBU=how`` items -> {TBU: how}; TBUs given as digits stay strings of digits."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, how = item.partition("=")
        if not sep or not name or how not in ("dead", "bar", "cross"):
            raise UsageError(f"--failed takes TBU=dead|bar|cross (e.g. tbu:0.2.3=dead), not {item!r}")
        out[name.strip()] = how
    return out


def check_names(mesh: Any, failed: list[int | str], reserved: list[int | str], transceiver: str) -> None:
    """Bad input (exit 2) for a TBU or lane profile that does not exist.

    The option is right, the name is not; the message says where the valid names are.
    """
    from photonics.budget import TRANSCEIVER_PROFILES
    from photonics.errors import MeshSpecError

    for option, names in (("--failed", failed), ("--reserved", reserved)):
        for name in names:
            try:
                mesh.tbu_index(name)
            except MeshSpecError as exc:
                raise CliError(f"{option} {name}: {explain(exc)}", "input", "MeshSpecError") from None
    if transceiver not in TRANSCEIVER_PROFILES:
        raise CliError(f"--transceiver {transceiver}: no such lane profile; choose from "
                       f"{', '.join(TRANSCEIVER_PROFILES)}", "input", "BudgetError")


def run(args: argparse.Namespace) -> int:
    """Plan, verify and report."""
    import numpy as np

    from photonics.physics import fabricated_params
    from photonics.routing import route_many
    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    mesh = load_mesh(args.mesh)
    pairs = [parse_connection(c) for c in args.connect]
    check_ports(mesh, pairs)
    failed = {(int(k) if k.isdigit() else k): v for k, v in parse_failed(args.failed).items()}
    reserved = [int(r) if r.isdigit() else r for r in args.reserved]
    check_names(mesh, list(failed), reserved, args.transceiver)
    avoided: dict[str, str] = {}  # by the map: name -> how it records the TBU
    if args.map is not None:  # TBUs calibration found broken; an explicit --failed wins
        from calibration.map import CalibrationMap

        cmap = CalibrationMap.load(args.map, mesh=mesh)
        from_map = cmap.failed_tbus(avoid_unverified=not args.trust_unverified)
        avoided = map_avoided(cmap, mesh, set(from_map) - set(failed))
        failed = {**from_map, **failed}
    params = None
    if args.fabricated is not None:
        params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(args.fabricated))
    plan = route_many(mesh, pairs, method="exact" if args.exact else "auto",
                      objective="worst" if args.worst else "total", failed=failed,
                      reserved=reserved, params=params, transceiver=args.transceiver)
    if plot:
        from lab_scripts.plots import mesh_drawing

        drawn = [{"label": f"{mesh.port_names[r.route.src]}->{mesh.port_names[r.route.dst]}: "
                           f"loss {r.loss_db:.1f} dB, ACR {r.acr_db:.1f} dB, margin {r.margin_db:.1f} dB",
                  "tbus": list(r.route.tbus)} for r in plan.routes]
        mesh_drawing(plot, mesh, drawn, plan.failed, f"{args.mesh}: {len(drawn)} routes "
                     f"({plan.method}{', optimal' if plan.optimal else ''})")
    if args.json:
        print_json({"mesh": mesh_spec(mesh, args.mesh), "transceiver": args.transceiver,
                    "plot": str(plot) if plot else None,
                    **plan.to_dict(mesh), "map_avoided": avoided})
        return 0
    rows = [(f"{mesh.port_names[r.route.src]}->{mesh.port_names[r.route.dst]}", len(r.route.hops),
             r.loss_db, r.transmission_db, r.acr_db, r.margin_db) for r in plan.routes]
    checked = sorted({w for r in plan.routes for w in r.check.wavelengths_nm})
    print(f"{len(rows)} route(s) on {args.mesh} by the {plan.method} router"
          f"{' (optimal)' if plan.optimal else ''}; unused TBUs parked; transceiver {args.transceiver}, "
          f"checked at {len(checked)} wavelengths {checked[0]:.2f}-{checked[-1]:.2f} nm (worst shown)")
    print(table(rows, ["route", "TBUs", "loss dB", "trans dB", "ACR dB", "margin dB"]))
    for r in plan.routes:
        path = " ".join(f"{mesh.tbu_names[h.tbu]}({h.state[0]})" for h in r.route.hops)
        print(f"{mesh.port_names[r.route.src]}->{mesh.port_names[r.route.dst]}: {path}")
    for name, how in avoided.items():
        print(f"avoided {name}: the calibration map {args.map} records it as {how}")
    if plot:
        print(f"wrote {plot}")
    return 0


def map_avoided(cmap: Any, mesh: Any, names: set[str]) -> dict[str, str]:
    """Each of ``names`` (TBUs the map has routing avoid) -> how the map records it, what light
    showed of an unverified one included (calibration.settable.recorded_as).
    """
    from calibration.settable import recorded_as

    return {name: recorded_as(cmap, mesh.tbu_index(name), "lumion route") or ""
            for name in sorted(names, key=mesh.tbu_index)}

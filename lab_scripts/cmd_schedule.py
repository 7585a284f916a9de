"""``lumion schedule``: all-to-all between mesh ports by conflict-free perfect matchings."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab_scripts.common import (
    UsageError,
    add_json_flag,
    count,
    load_mesh,
    positive,
    print_json,
    seed,
    table,
)
from lab_scripts.paths import output_folder

SCHEMA = "lumion.schedule"
VERSION = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "schedule",
        help="all-to-all by matchings: N-1 conflict-free configurations covering every port pair",
        description="Split all-to-all connectivity between ports into perfect matchings (circle "
        "method), each routed as one verified mesh configuration. A pair is one bidirectional "
        "circuit (one route; the mesh is reciprocal). Example: lumion schedule --mesh smartlight "
        "--ports 0,6,9,12,18,25,28,31   or   --ports spread:8",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    p.add_argument("--ports", required=True, metavar="P1,P2,...",
                   help="comma-separated ports (3 or port:3), or spread:N for N well-connected ports")
    p.add_argument("--no-budget", action="store_true",
                   help="report link margins but do not refuse links that cannot close the budget")
    p.add_argument("--labelings", type=positive, default=12, help="port labelings to try (default 12)")
    p.add_argument("--search-checks", type=count, default=None, metavar="N",
                   help="when no circle labeling reaches the N-1 bound, search the 1-factorizations, "
                   "routing at most N matchings (default 600; 0: split instead)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the relabelings and the search (default 0)")
    p.add_argument("--map", metavar="FILE",
                   help="calibration map: the TBUs it records as failed or unverified are never routed "
                   "through (checked against --mesh as `lumion route --map` does)")
    p.add_argument("--out", metavar="DIR", help="write each configuration as a lumion.configuration "
                   "file (DIR/matching-01.json, ...) that `lumion program --configuration` accepts")
    add_json_flag(p)
    p.set_defaults(run=run)


def save_configurations(folder: Path, stem: str, configurations: Sequence[Any], mesh: Any) -> list[str]:
    """Write ``configurations`` as ``folder/stem-01.json``, ... (lumion.configuration), each atomically.

    The folder is made if needed (not its parents: the path policy checked those).
    """
    from photonics.atomic import atomic_write_text

    folder.mkdir(exist_ok=True)
    width = max(2, len(str(len(configurations))))
    paths = []
    for k, conf in enumerate(configurations):
        path = folder / f"{stem}-{k + 1:0{width}d}.json"
        atomic_write_text(path, json.dumps(conf.to_dict(mesh), indent=1))
        paths.append(str(path))
    return paths


def run(args: argparse.Namespace) -> int:
    """Schedule and report."""
    from photonics.fabric import schedule, spread_ports
    out = output_folder(args.out, "--out") if args.out is not None else None
    mesh = load_mesh(args.mesh)
    text = args.ports.strip()
    if text.startswith("spread:"):
        try:
            ports: list[int | str] = list(spread_ports(mesh, int(text.split(":", 1)[1])))
        except ValueError:
            raise UsageError(f"--ports spread:N takes a number, not {text!r}") from None
    else:
        ports = [p.strip() for p in text.split(",") if p.strip()]
    failed: dict[int | str, str] = {}
    if args.map is not None:  # TBUs calibration found broken (photonics.fabric.map_failed_tbus)
        from calibration.map import CalibrationMap
        from photonics.fabric.plan import map_failed_tbus

        failed = map_failed_tbus(CalibrationMap.load(args.map, mesh=mesh))
    from photonics.fabric.matchings import SEARCH_CHECKS
    checks = SEARCH_CHECKS if args.search_checks is None else args.search_checks
    stream = None if args.json else sys.stderr
    s = schedule(mesh, ports, require_budget=not args.no_budget, labelings=args.labelings, seed=args.seed,
                 search_checks=checks, failed=failed,
                 progress=None if stream is None else lambda line: print(line, file=stream, flush=True))
    d = s.to_dict(mesh)
    confs = [c.configuration.for_mesh(mesh) for c in s.configs]
    files = save_configurations(out, "matching", confs, mesh) if out is not None else []
    for k, (row, conf) in enumerate(zip(d["configurations"], confs, strict=True)):
        row["configuration"] = conf.to_dict(mesh)
        row["configuration_file"] = files[k] if files else None
    if args.json:
        print_json({"schema": SCHEMA, "version": VERSION, "mesh": args.mesh, **d,
                    "out": str(out) if out else None})
        return 0
    gap = "reaches the lower bound" if s.overhead == 0 else f"{s.overhead} above the lower bound"
    how = {"circle": "circle method", "search": f"factorization search, {s.search_checks} matchings routed",
           "split": "unroutable matchings split" + (f" after a search of {s.search_checks} matchings"
                                                    if s.search_checks else "")}[s.method]
    print(f"{len(s.ports)} ports on {args.mesh}: {len(s.configs)} configurations ({gap} of "
          f"{s.lower_bound}; {how}); {s.labelings_tried} labeling(s) tried, {s.seconds:.2f} s")
    rows = [(k + 1, len(c.pairs), c.worst_loss_db, c.worst_acr_db, c.worst_margin_db,
             " ".join(f"{a}-{b}" for a, b in c.pairs)) for k, c in enumerate(s.configs)]
    print(table(rows, ["#", "pairs", "worst loss dB", "worst ACR dB", "margin dB", "pairs (port-port)"]))
    if files:
        print(f"wrote {len(files)} configurations to {out} (lumion program --configuration {files[0]})")
    return 0

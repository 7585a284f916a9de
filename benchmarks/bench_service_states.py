"""Heater states through the service (POST /api/v1/states) on a chip calibrated by light.

Starts `lumion serve --map MAP.json` on the simulated bench (realistic chip, seed of the map;
heater driver on a pty, SCPI laser and meter on loopback sockets), places a one-link job
(gpu4 -> gpu5) so the chip runs work beside the state, and for each state synthesised through
the same map (`lumion synthesize --map MAP.json ... --out`) posts it and clears it ``--cycles``
times. Reports per state: the answers (ok / unverified / mismatch), the worst
|measured - predicted| of any checked port (fraction of the input's power; the tolerance is
instruments.state_check.STATE_TOL = 0.05), the arms light could not verify, the largest change
of the running link (dB), the client's time and the service's stages (median ms).

The map must be phase-calibrated and be the chip's:
    .venv/bin/lumion calibrate --bench sim --seed 0 --common-phase --out MAP.json
Usage:
    .venv/bin/python benchmarks/bench_service_states.py --map MAP.json [--cycles 5] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's service start
from bench_controlplane import start_service

TARGETS = {  # the state kinds smartlight takes (a unitary needs a square or triangular mesh)
    "ring filter 1550:0.02": ["--filter", "1550:0.02"],
    "mz-filter 1550:0.178": ["--mz-filter", "1550:0.178"],

}


def synthesize(folder: Path, cmap: str, args: list[str]) -> dict:
    """What `lumion synthesize --mesh smartlight --map MAP ... --out` writes."""
    from lab_scripts.cli import main

    out = folder / "state.json"
    with contextlib.redirect_stdout(io.StringIO()):
        if main(["synthesize", "--mesh", "smartlight", "--map", cmap, *args, "--out", str(out)]) != 0:
            raise SystemExit(f"lumion synthesize {' '.join(args)} failed")
    return json.loads(out.read_text())


def one_state(client: httpx.Client, doc: dict, cycles: int) -> dict:
    """Post and clear ``doc`` ``cycles`` times; the summary of the answers."""
    statuses, worst, blind, link_change, client_ms, refusals = [], [], set(), [], [], []
    stages: dict[str, list[float]] = {}
    for _ in range(cycles):
        t0 = time.perf_counter()
        r = client.post("/states", json=doc)
        client_ms.append((time.perf_counter() - t0) * 1e3)
        body = r.json()
        statuses.append(body.get("status", body.get("kind")))
        v = body.get("verification") or {}
        worst += [abs(i["worst"]["difference"]) for i in v.get("inputs", []) if i.get("worst")]
        blind |= {f"{b['tbu']} {b['arm']}" for b in v.get("not_verifiable", [])}
        link_change += [abs(x["change_db"]) for x in (body.get("links") or {}).get("links", [])
                        if x.get("change_db") is not None]
        for name, ms in body.get("measured_ms", {}).items():
            stages.setdefault(name, []).append(ms)
        if r.status_code == 201:
            client.delete(f"/states/{body['id']}").raise_for_status()
        else:
            refusals.append(body["error"])
    return {"answers": {s: statuses.count(s) for s in sorted(set(statuses))},
            "worst_port_difference": round(max(worst, default=float("nan")), 4),
            "not_verifiable": sorted(blind),
            "running_link_change_db": round(max(link_change, default=float("nan")), 4),
            "client_ms_median": round(statistics.median(client_ms), 1),
            "first_refusal": refusals[0] if refusals else None,
            "stages_ms_median": {k: round(statistics.median(v), 1) for k, v in stages.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", required=True, metavar="MAP.json", help="phase-calibrated map of the sim chip")
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-states-"))
    docs = {name: synthesize(folder, args.map, a) for name, a in TARGETS.items()}
    proc, api, token = start_service(folder / "cp.db", args.map)
    try:
        with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            c.post("/jobs", json={"pattern": "links", "links": [["gpu4", "gpu5"]]}).raise_for_status()
            out = {name: one_state(c, doc, args.cycles) for name, doc in docs.items()}
    finally:
        proc.terminate()
        proc.wait(30)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for name, r in out.items():
            print(f"{name}: {r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

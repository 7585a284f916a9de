"""Multicast jobs through the service: placement and a receiver's splice, verified by light.

Starts `lumion serve --map MAP.json` on the simulated bench (realistic chip of the map's seed;
one transceiver per accelerator behind its pty I2C bridge, the meters), then ``--cycles``
times: place a multicast job gpu0 -> {gpu1, gpu2} (POST /api/v1/jobs, pattern multicast),
report gpu2 failed (spliced to a free spare), delete the job and repair gpu2. Reports the
answers (verified by light or not), the worst branch |measured - planned| (dB), the held
branch's largest change across the splice (dB, by light), the client's time and the
service's stages (median ms).

    .venv/bin/lumion calibrate --bench sim --seed 0 --out MAP.json
    .venv/bin/python benchmarks/bench_service_multicast.py --map MAP.json [--cycles 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's service start
from bench_controlplane import start_service

GROUP = {"src": "gpu0", "dsts": ["gpu1", "gpu2"]}


def timed(call) -> tuple[dict, float]:
    """(JSON answer, client ms) of one request; raises on an HTTP error."""
    t0 = time.perf_counter()
    r = call()
    ms = (time.perf_counter() - t0) * 1e3
    r.raise_for_status()
    return r.json(), ms


def summarise(rows: list[dict], key: str) -> dict:
    """Answers, worst branch difference, held change, client and stage medians of one step."""
    stages: dict[str, list[float]] = {}
    for r in rows:
        for s in r["answer"].get("stages", []):
            stages.setdefault(s["stage"], []).append((s["end_s"] - s["start_s"]) * 1e3)
    links = [lk for r in rows for lk in r["answer"]["verification"]["links"]]
    held = [abs(lk["change_db"]) for lk in links if lk["change_db"] is not None]
    return {"step": key, "verified": sorted({r["answer"]["verified"] for r in rows}),
            "worst_branch_db": round(max(abs(lk["difference_db"]) for lk in links), 3),
            "held_change_db": round(max(held), 3) if held else None,
            "client_ms_median": round(statistics.median(r["ms"] for r in rows), 1),
            "stages_ms_median": {k: round(statistics.median(v), 1) for k, v in stages.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", required=True, metavar="MAP.json", help="calibration map of the sim chip")
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    proc, api, token = start_service(Path(tempfile.mkdtemp(prefix="bench-mc-")) / "cp.db", args.map)
    placed, spliced = [], []
    try:
        with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            for _ in range(args.cycles):
                job, ms = timed(lambda: c.post("/jobs", json={"pattern": "multicast", "groups": [GROUP]}))
                placed.append({"answer": job, "ms": ms})
                rec, ms = timed(lambda: c.post("/failures", json={"accelerator": "gpu2"}))
                spliced.append({"answer": rec, "ms": ms})
                c.delete(f"/jobs/{job['id']}").raise_for_status()
                c.post("/accelerators/gpu2/repair").raise_for_status()
    finally:
        proc.terminate()
        proc.wait(30)
    out = [summarise(placed, "place"), summarise(spliced, "splice gpu2 -> spare")]
    print(json.dumps(out, indent=1) if args.json else "\n".join(str(o) for o in out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

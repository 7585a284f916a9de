"""When does optical multicast pay? Collectives with and without multicast trees, one table.

For each group size (ranks on the SmartLight-size mesh), message size and lane budget, the
collective is compiled three ways and timed in steady state (docs/collectives.md):

* broadcast: ``broadcast-flat`` with ``multicast=True`` against the best point-to-point
  schedule (pipelined chain or binary tree);
* all-gather: ``allgather-flat`` with multicast against the ring all-gather;
* all-reduce: ``tree-multicast`` (tree reduce, multicast broadcast) with multicast against
  the best of ring and tree all-reduce.

Budgets (launch power minus receiver sensitivity): ``dwdm-10g-zr`` (23 dB, the default
lane), and the same lane launching 3 or 6 dB stronger (26, 29 dB; e.g. an amplified
transmitter), since the budget is what limits how wide a tree can split. A weaker lane
(``dwdm-10g-er``, 15 dB, or ZR 3 dB weaker) cannot close even the point-to-point ring
on this mesh with the 3 dB margin, so there is nothing to compare.

    python benchmarks/bench_multicast.py --png docs/img/multicast_speedup.png   # full grid (a few minutes)
    python benchmarks/bench_multicast.py --quick --json                         # 4 ranks, 2 sizes, 2 budgets
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from photonics.budget import transceiver_profile
from photonics.collectives import by_pattern, compile_collective, rank_names, slot_fabric

KINDS = {"broadcast": ("broadcast-flat", ("broadcast-chain", "broadcast-tree")),
         "allgather": ("allgather-flat", ("allgather-ring",)),
         "allreduce": ("tree-multicast", ("ring", "tree"))}
SIZES_MB = (0.01, 1.0, 64.0)
RANKS = (3, 4, 6, 8)


def budgets() -> dict[str, object]:
    zr = transceiver_profile("dwdm-10g-zr")
    return {"dwdm-10g-zr (23 dB)": zr,
            "zr +3 dB launch (26 dB)": replace(zr, tx_power_dbm=zr.tx_power_dbm + 3.0),
            "zr +6 dB launch (29 dB)": replace(zr, tx_power_dbm=zr.tx_power_dbm + 6.0)}


def one(kind: str, n: int, size_mb: float, lane: object) -> dict[str, object]:
    fab = slot_fabric("smartlight", n, transceiver=lane)
    names = rank_names(fab, n)
    flat, p2p = KINDS[kind]
    mc = compile_collective(by_pattern(flat, n), fab, names, size_bytes=size_mb * 1e6, multicast=True)
    best = min(((p, compile_collective(by_pattern(p, n), fab, names, size_bytes=size_mb * 1e6).completion_ms)
                for p in p2p), key=lambda kv: kv[1])
    widest = max((len(ds) for c in mc.configs for _, ds in c.trees), default=0)
    return {"kind": kind, "ranks": n, "size_mb": size_mb, "multicast_ms": mc.completion_ms,
            "multicast_rounds": mc.multicast_rounds, "rounds": len(mc.rounds), "widest_tree": widest,
            "point_to_point": best[0], "point_to_point_ms": best[1], "speedup": best[1] / mc.completion_ms}


def markdown(rows: list[dict[str, object]]) -> str:
    head = ("| collective | budget | ranks | message | multicast ms (tree rounds / rounds, widest) "
            "| best point to point ms | speedup |\n|---|---|---|---|---|---|---|\n")
    body = "".join(
        f"| {r['kind']} | {r['budget']} | {r['ranks']} | {r['size_mb']:g} MB | {r['multicast_ms']:.3f} "
        f"({r['multicast_rounds']}/{r['rounds']}, 1 to {r['widest_tree']}) | {r['point_to_point_ms']:.3f} "
        f"({r['point_to_point']}) | {r['speedup']:.2f}x |\n" for r in rows)
    return head + body


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Speedup against group size: one panel per collective, colour = budget, marker = message size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(KINDS)
    budget_names = list(dict.fromkeys(r["budget"] for r in rows))
    sizes = sorted({r["size_mb"] for r in rows})
    colours = dict(zip(budget_names, ("tab:blue", "tab:orange", "tab:green"), strict=False))
    styles = dict(zip(sizes, (("o", ":"), ("s", "--"), ("^", "-")), strict=False))
    fig, axes = plt.subplots(1, len(kinds), figsize=(15, 4.8), sharey=True)
    for ax, kind in zip(axes, kinds, strict=True):
        for budget in budget_names:
            for size in sizes:
                pts = sorted((r["ranks"], r["speedup"]) for r in rows
                             if r["kind"] == kind and r["budget"] == budget and r["size_mb"] == size)
                if pts:
                    marker, line = styles[size]
                    ax.plot(*zip(*pts, strict=True), marker=marker, linestyle=line, color=colours[budget],
                            label=f"{budget}, {size:g} MB")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{kind}: multicast vs best point to point")
        ax.set_xlabel("ranks (group size)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("speedup (x, >1: multicast faster)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 ranks, two sizes, two budgets")
    ap.add_argument("--png", type=Path, default=None, help="write the speedup plot here")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = ap.parse_args()
    ranks, sizes, lanes = RANKS, SIZES_MB, budgets()
    if args.quick:
        ranks, sizes = (4,), (0.01, 64.0)
        lanes = {k: v for k, v in lanes.items() if "+3 dB" not in k}
    rows = []
    total = len(KINDS) * len(ranks) * len(sizes) * len(lanes)
    t0 = time.perf_counter()
    for budget, lane in lanes.items():
        for kind in KINDS:
            for n in ranks:
                for size in sizes:
                    rows.append({"budget": budget, **one(kind, n, size, lane)})
                    print(f"[{len(rows)}/{total}] {budget}: {kind} {n} ranks {size:g} MB: "
                          f"{rows[-1]['speedup']:.2f}x ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if args.png:
        plot(rows, args.png)
    print(json.dumps(rows, indent=1) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

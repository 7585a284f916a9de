"""The electrical heater check's margins (issue 26 item 3): healthy heaters never named, faults always.

Per seed (9300 + k: no test uses them) and fabrication spread (1x, and 2x as the trust
campaign's ``spread_2x``), a SmartLight-class realistic chip gets one open and one shorted
heater on random channels; the module's read-back (recorded offsets and scatter) is taken at
zero and at the probe current, and ``calibration.electrical.check_heaters`` judges it.
Prints the healthy heaters' measured resistance against nominal (the verdict lines sit at
``SHORT_RATIO`` and ``OPEN_RATIO``) and the faults named.

    python benchmarks/bench_heater_check.py --seeds 50
"""

from __future__ import annotations

import argparse

import numpy as np

from calibration.electrical import OPEN_RATIO, PROBE_MA, SHORT_RATIO, check_heaters, nominal_volts
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import widen_spread
from photonics.topology import smartlight

FIRST_SEED = 9300


def main(argv: list[str] | None = None) -> int:
    """Run the check on every chip; print the figures; exit 1 on any wrong verdict."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=50)
    args = p.parse_args(argv)
    mesh = smartlight()
    n = mesh.n_heaters
    ratios: list[float] = []
    injected = named = wrong = 0
    for seed in range(FIRST_SEED, FIRST_SEED + args.seeds):
        for spread in (1.0, 2.0):
            ch_open, ch_short = (int(x) for x in np.random.default_rng(seed).choice(n, 2, replace=False))
            chip = Chip(mesh, seed, clock=lambda: 0.0,
                        heater_faults={ch_open: "open-heater", ch_short: "shorted-heater"})
            if spread != 1.0:
                widen_spread(chip, spread)
            bench = DirectBench(chip)
            zero, probe = bench.heater_readback(np.zeros(n)), bench.heater_readback(np.full(n, PROBE_MA))
            resistance = (probe.volts - zero.volts) / (probe.milliamps - zero.milliamps)
            r = resistance / (nominal_volts(PROBE_MA) / PROBE_MA)
            ratios += [float(x) for k, x in enumerate(r) if k not in (ch_open, ch_short)]
            found = {f.channel: f.kind for f in check_heaters(bench)}
            injected += 2
            named += (found.get(ch_open) == "open-heater") + (found.get(ch_short) == "shorted-heater")
            wrong += len(set(found) - {ch_open, ch_short})
    print(f"chips {2 * args.seeds} (seeds {FIRST_SEED}..{FIRST_SEED + args.seeds - 1}, 1x and 2x spread), "
          f"heaters {2 * args.seeds * n}: healthy R/R_nominal {min(ratios):.3f}..{max(ratios):.3f} "
          f"(verdict lines {SHORT_RATIO} and {OPEN_RATIO}); faults injected {injected}, named {named}; "
          f"healthy heaters named {wrong}")
    return 0 if named == injected and not wrong else 1


if __name__ == "__main__":
    raise SystemExit(main())

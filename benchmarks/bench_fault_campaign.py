"""The long fault campaign of issue 13: many random steps through random byte-level faults.

Every step is checked (instruments/sim/fault_campaign.py); the first violation stops the
run and is printed with its step, so it can be replayed. Progress goes to stderr.

    python benchmarks/bench_fault_campaign.py --steps 100000 [--protocol binary] [--verify all] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from instruments.sim.fault_campaign import CampaignViolationError, FaultCampaign, random_steps
from instruments.sim.faults import KINDS

CHUNK = 1000  # steps between progress lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault-rate", type=float, default=0.15)
    p.add_argument("--protocol", choices=("binary", "ascii"), default="binary")
    p.add_argument("--verify", choices=("all", "last"), default="all")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)  # the drivers log every recovery; the counts say enough
    kinds = KINDS if args.verify == "all" else tuple(k for k in KINDS if k != "corrupt_command")
    steps = random_steps(args.steps, seed=args.seed, fault_rate=args.fault_rate, kinds=kinds)
    faults = sum(s.fault is not None for s in steps)
    t0, c0 = time.perf_counter(), time.process_time()
    violation = None
    with FaultCampaign(heater={"protocol": args.protocol, "verify": args.verify}, timeout_s=0.15) as c:
        try:
            for k in range(0, len(steps), CHUNK):
                c.run(steps[k:k + CHUNK])
                print(f"{min(k + CHUNK, len(steps))}/{len(steps)} steps, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
        except CampaignViolationError as exc:
            violation = str(exc)
        outcomes = dict(sorted(c.outcomes.items()))
        unknown = dict(c.unknown_states)
        done = c.steps
    result = {"steps": done, "faults_scheduled": faults, "protocol": args.protocol, "verify": args.verify,
              "seed": args.seed, "violation": violation, "seconds": time.perf_counter() - t0,
              # CPU of every thread of the process (the simulators' server threads included):
              # the figure to compare on a shared machine; the wall time waits on time-outs.
              "cpu_s": time.process_time() - c0, "load_average_1min": round(os.getloadavg()[0], 2),
              "outcomes": outcomes,
              # states the controller marked unknown after a step, read back and then checked
              "unknown_states": unknown}
    print(json.dumps(result, indent=1) if args.json else result)
    return 1 if violation else 0


if __name__ == "__main__":
    raise SystemExit(main())

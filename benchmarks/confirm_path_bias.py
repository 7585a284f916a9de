"""Why one light path can mislead the confirmation (issue 26, docs/calibration.md "Verified, or named").

Calibrates the trust campaign's default chip of ``--seed`` (9000), then confirms ``--tbu``
(tbu:2.3.2) through every distinct light path a few random bans produce, with the finished
map: on the chip as made, on the same chip with every coupler exactly 50 % (no cross-state
leak), and -- for the paths light disagrees on -- with one TBU's couplers made ideal at a
time, which names the TBU whose leak shifts the fringe. Prints one line per path and the
map's own error at the TBU against the truth.

    python benchmarks/confirm_path_bias.py [--seed 9000] [--tbu tbu:2.3.2]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from calibration.confirm import CONFIRM_TOL_RAD, confirm_tbu
from calibration.paths import plan_probe
from calibration.procedure import Options, Progress, calibrate
from calibration.records import base_currents
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import make_chip

BANS = 60  # random sets of banned TBUs tried: enough to find every short path around one TBU


def couplers(chip, tbus, kappa: float = 0.5) -> None:
    """Make the couplers of ``tbus`` (all when None) exactly ``kappa`` on ``chip``'s truth."""
    p = chip._truth.params
    k1, k2 = p.kappa1.copy(), p.kappa2.copy()
    idx = slice(None) if tbus is None else list(tbus)
    k1[idx], k2[idx] = kappa, kappa
    chip.truth = chip._truth = replace(chip._truth, params=replace(p, kappa1=k1, kappa2=k2))
    chip._params = None


def offset(seed: int, cmap, probe, base, ideal=()) -> float:
    """The fringe offset (rad) light shows through ``probe`` on a fresh chip of ``seed``."""
    chip, _ = make_chip("default", seed)
    if ideal != ():
        couplers(chip, ideal)
    return confirm_tbu(DirectBench(chip), cmap, probe, base, independent_path=True, wavelength_nm=1550.0,
                       settle_s=Options().settle_s).offset_rad


def main() -> None:
    """Calibrate, then confirm one TBU through every path found (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=9000)
    ap.add_argument("--tbu", default="tbu:2.3.2")
    args = ap.parse_args()
    chip, _ = make_chip("default", args.seed)
    result = calibrate(DirectBench(chip), Options(), progress=Progress(stream=None))
    cmap, records, mesh = result.cmap, result.records, chip.mesh
    t = mesh.tbu_index(args.tbu)
    alpha = chip.truth.heaters.alpha
    err = float(np.angle(np.exp(1j * (cmap.delta[t] - (alpha[2 * t] - alpha[2 * t + 1])))))
    print(f"{args.tbu}: map offset error against the truth {err:+.4f} rad; tolerance {CONFIRM_TOL_RAD} rad")
    rng = np.random.default_rng(0)
    allowed = set(records) - {t}
    probes = {}
    for k in range(BANS):
        banned = set() if k == 0 else {int(x) for x in rng.choice(sorted(allowed), size=rng.integers(1, 12),
                                                                  replace=False)}
        probe = plan_probe(mesh, t, allowed - banned, mesh.peer(), banned=banned)
        if probe is not None:
            probes.setdefault((probe.src, probe.outputs, tuple(h.tbu for h in probe.hops)), probe)
    for probe in probes.values():
        base = base_currents(mesh.n_heaters, records, probe)
        real, ideal = offset(args.seed, cmap, probe, base), offset(args.seed, cmap, probe, base, None)
        line = (f"from {mesh.port_names[probe.src]} to {[mesh.port_names[o] for o in probe.outputs]} "
                f"through {len(probe.hops)} TBUs: offset {real:+.4f} rad; "
                f"every coupler 50 %: {ideal:+.4f} rad")
        if abs(real) > CONFIRM_TOL_RAD:
            culprits = [(mesh.tbu_names[h.tbu], offset(args.seed, cmap, probe, base, [h.tbu]))
                        for h in probe.hops]
            line += "; one TBU's couplers 50 %: " + ", ".join(f"{n} {o:+.4f}" for n, o in culprits)
        print(line)


if __name__ == "__main__":
    main()

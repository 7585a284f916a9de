"""A checkpoint's fits are read again by light before a run resumes them (issue 26).

A checkpoint holds fits taken when it was written; a run resumed later (an interrupted run,
the next morning) may find the chip at another temperature, where every TBU's passive phase
has moved by ``c_t dT`` (~0.03 rad/K RMS, docs/calibration.md "Drift during the run"). Those
fits would be believed: the drift references start afresh and know nothing of the gap, and
the final confirmation only names TBUs beyond its 0.05 rad tolerance. So before resuming, up
to :data:`RESUME_PROBES` refined resumed TBUs that light reaches without crossing any other
TBU are read at four fixed phases through their fits (the drift references' states,
:func:`calibration.drift.reference_for`): the fringe's position is how far the TBU moved
since its fit. A median beyond :data:`RESUME_MOVED_RAD` means the chip is not the one the
checkpoint measured: the run starts afresh instead, and says so.
"""

from __future__ import annotations

import numpy as np

from calibration.bench import Bench
from calibration.confirm import CONFIRM_TOL_RAD
from calibration.drift import read_reference, reference_for
from calibration.options import Options
from calibration.paths import plan_probe
from calibration.records import TBURecord

# Resumed TBUs read (16 operations each, with the reading's repeat): a median of four is not
# moved by one TBU with a small drift coefficient, nor by one meter glitch.
RESUME_PROBES = 4
# A refined fit read this way sits within ~0.01 rad of light (fit error, meter noise); the
# median of four TBUs moves past half the confirmation tolerance once the chip is ~1.2 K away
# (median |c_t| ~0.02 rad/K), where the resumed map would start to fill the tolerance.
RESUME_MOVED_RAD = CONFIRM_TOL_RAD / 2


def resumed_move(bench: Bench, records: dict[int, TBURecord], options: Options) -> tuple[float, int] | None:
    """(median phase move (rad), TBUs read) of the resumed ``records`` by light now; None when
    no refined resumed TBU can be read without crossing another TBU.
    """
    mesh = bench.mesh
    peer = mesh.peer()
    offsets = []
    for t, rec in sorted(records.items(), key=lambda kv: kv[1].seq):
        if rec.stage == "bootstrap":  # made through unknown TBUs: not accurate enough to judge by
            continue
        probe = plan_probe(mesh, t, set(), peer)
        if probe is None or probe.length:
            continue
        ref = reference_for(rec, probe, records, mesh.n_heaters, bench.max_current_ma)
        if ref is None:
            continue
        reading = read_reference(bench, ref, options.wavelength_nm, options.settle_s, None)
        offsets.append(abs(reading.offset_rad))
        if len(offsets) == RESUME_PROBES:
            break
    return (float(np.median(offsets)), len(offsets)) if offsets else None

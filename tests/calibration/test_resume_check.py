"""A checkpoint is read again by light before its fits are resumed (issue 26).

Before, a run resumed whatever the chip's temperature: fits taken at one temperature were
believed at another (the drift references start afresh and know nothing of the gap).
"""

import io

import pytest

from calibration.checkpoint import load_checkpoint
from calibration.procedure import Options, Progress, calibrate
from calibration.resume import RESUME_MOVED_RAD, resumed_move
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import OFF_RAD, tbu_errors
from photonics.topology import hexagonal

MESH = hexagonal(2, 2)
FAST = Options(points=12, refine_points=16, crosstalk_repeats=0)


class InterruptError(Exception):
    pass


def interrupted_checkpoint(tmp_path):
    """hex:2x2 seed 7 interrupted in its rechecks: every TBU refined, saved in the checkpoint."""
    ckpt = tmp_path / "map.json.ckpt"

    def hook(stage, tbu):
        if stage in ("recheck", "crosstalk", "confirm"):
            raise InterruptError

    with pytest.raises(InterruptError):
        calibrate(DirectBench(Chip(MESH, 7, clock=lambda: 0.0)), FAST, checkpoint=ckpt,
                  progress=Progress(stream=None), on_tbu=hook)
    records, _, _ = load_checkpoint(ckpt, Chip(MESH, 7).chip_id, MESH)
    assert all(r.stage == "refine" for r in records.values())
    return ckpt, records


def chip_at(kelvin: float) -> Chip:
    chip = Chip(MESH, 7, clock=lambda: 0.0)
    chip.set_temperature_profile(lambda t_s: kelvin)
    return chip


@pytest.mark.slow  # 25 s in the quick suite at load 10-18 (issue 29)
def test_a_checkpoint_resumed_at_another_temperature_starts_afresh(tmp_path):
    ckpt, records = interrupted_checkpoint(tmp_path)
    chip = chip_at(4.0)  # 4 K warmer than when the checkpoint was written
    moved, n = resumed_move(DirectBench(chip_at(4.0)), records, FAST)
    assert n >= 2
    assert moved > RESUME_MOVED_RAD
    notes = io.StringIO()
    result = calibrate(DirectBench(chip), FAST, checkpoint=ckpt, progress=Progress(stream=notes, every=10**6))
    assert f"not resuming {ckpt}: light shows its TBUs moved" in notes.getvalue()
    assert "starting afresh" in notes.getvalue()
    assert "resuming from" not in notes.getvalue()  # one verdict: it used to say it resumed first
    assert result.cmap.quality["resumed_operations"] == 0
    off, _ = tbu_errors(result.cmap, chip)
    assert max(off[t] for t in range(MESH.n_tbus) if t not in result.cmap.failed) < OFF_RAD


@pytest.mark.slow  # 13 s in the quick suite at load 10-18 (issue 29)
def test_a_checkpoint_resumed_on_the_same_chip_is_resumed(tmp_path):
    ckpt, records = interrupted_checkpoint(tmp_path)
    moved, _ = resumed_move(DirectBench(chip_at(0.0)), records, FAST)
    assert moved < RESUME_MOVED_RAD / 2
    notes = io.StringIO()
    result = calibrate(DirectBench(chip_at(0.0)), FAST, checkpoint=ckpt, progress=Progress(stream=notes))
    assert "not resuming" not in notes.getvalue()
    assert f"resuming from {ckpt}" in notes.getvalue()
    assert result.cmap.quality["resumed_operations"] > 0

"""The calibration checkpoint is written at most every ``CHECKPOINT_EVERY_S`` while a run
measures, and with the run's last state however the run ends (issue 29).

Before, it was rewritten and fsynced after every TBU: 227 writes in a simulated SmartLight
run. A ``kill -9`` now loses at most ``CHECKPOINT_EVERY_S`` of measuring (the file on disk is
a whole earlier state, calibration.checkpoint); an interrupted or failed run leaves exactly the
file the old writer left.
"""

import json
import math

import pytest

from calibration import checkpoint
from calibration.checkpoint import CheckpointWriter, load_checkpoint
from calibration.procedure import Options, Progress, calibrate
from calibration.records import TBURecord
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.topology import hexagonal

MESH = hexagonal(1, 2)
# drift tracking off: its reference readings are not in the checkpoint (as test_procedure)
OPTIONS = Options(points=12, refine_points=12, crosstalk_repeats=0, drift_references=0)


def record(seq: int) -> TBURecord:
    return TBURecord(0.1 * seq, [1.0, 1.0], [0.0, 0.0], 0.01, [0.01, 0.01], 1.0, 0.01, "bootstrap",
                     0, [1], seq=seq, changed=seq)


def test_offers_are_written_at_most_every_interval_and_the_last_one_on_flush(tmp_path):
    now = [0.0]
    path = tmp_path / "map.json.ckpt"
    writer = CheckpointWriter(path, "chip", MESH, every_s=2.0, clock=lambda: now[0])

    def offer(n: int, at_s: float) -> None:
        now[0] = at_s
        writer.offer({t: record(t + 1) for t in range(n)}, 10 * n, at_s, {}, {})

    def on_disk() -> int:
        return len(load_checkpoint(path, "chip", MESH)[0])

    offer(1, 0.0)  # the first state is written at once: a run's file exists from its first TBU
    assert (on_disk(), writer.writes) == (1, 1)
    offer(2, 1.0)
    offer(3, 1.9)
    assert (on_disk(), writer.writes) == (1, 1)  # 1.9 s after the last write: not yet
    offer(4, 2.0)
    assert (on_disk(), writer.writes) == (4, 2)
    offer(5, 2.5)
    writer.flush()  # the run ended: its last state, whatever the clock says
    assert (on_disk(), writer.writes) == (5, 3)
    assert load_checkpoint(path, "chip", MESH)[1] == 50
    writer.flush()  # nothing new offered: nothing written
    assert writer.writes == 3


class InterruptError(Exception):
    pass


def interrupted(tmp_path, name, every_s, monkeypatch):
    """hex:1x2 seed 5 stopped before its 5th TBU with the checkpoint written at most every
    ``every_s``; the file's contents (without its run time) and how many times it was written."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY_S", every_s)
    writes = []
    save = checkpoint.save_checkpoint
    monkeypatch.setattr(checkpoint, "save_checkpoint", lambda *a, **k: (writes.append(1), save(*a, **k)))
    seen = []

    def stop_after_4(stage, tbu):
        if len(seen) == 4:
            raise InterruptError
        seen.append((stage, tbu))

    ckpt = tmp_path / name
    with pytest.raises(InterruptError):
        calibrate(DirectBench(Chip(MESH, seed=5, clock=lambda: 0.0)), OPTIONS, checkpoint=ckpt,
                  progress=Progress(stream=None), on_tbu=stop_after_4)
    data = json.loads(ckpt.read_text())
    data.pop("duration_s")  # the run's wall-clock time
    return data, len(writes)


def test_an_interrupted_run_leaves_the_file_written_after_every_tbu(tmp_path, monkeypatch):
    every_tbu, every_tbu_writes = interrupted(tmp_path, "a.ckpt", 0.0, monkeypatch)
    lazy, lazy_writes = interrupted(tmp_path, "b.ckpt", math.inf, monkeypatch)
    assert every_tbu_writes == 4  # the old writer: after each TBU fitted
    assert lazy_writes == 2  # the first TBU, then the last state when the run was stopped
    assert lazy == every_tbu
    assert lazy["operations"] == 4 * 2 * 12
    assert len(lazy["tbus"]) == 4

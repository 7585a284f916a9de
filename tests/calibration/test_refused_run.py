"""A calibration the procedure refuses (the chip moved under the map) exits with its own status
and hint, and leaves no checkpoint a later run could resume at another temperature (issue 26).

Before: `lumion calibrate` exited 2 ("bad input") with the hint "fix the file, path or value
named above", and the refused run's checkpoint stayed: the next run resumed its fits, taken
while the chip drifted, at whatever temperature the chip had settled to.
"""

import json

import pytest

from calibration.map import CalibrationError, CalibrationRefusedError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from lab_scripts.cli import main
from lab_scripts.errors import EXIT_REFUSED
from photonics.topology import hexagonal

FAST = Options(points=12, refine_points=16, crosstalk_repeats=0, drift_references=4)


def drifting_bench(k_per_min: float = 60.0) -> DirectBench:
    """hex:2x2 seed 7 warming ``k_per_min`` from the start (refused at 60 K/min: test_drift.py)."""
    chip = Chip(hexagonal(2, 2), 7, clock=lambda: 0.0)
    chip.set_temperature_profile(lambda t_s: k_per_min * t_s / 60.0)
    return DirectBench(chip)


@pytest.mark.slow  # 19 s in the quick suite at load 10-18 (issue 29)
def test_a_refused_run_removes_its_checkpoint_and_says_so(tmp_path):
    ckpt = tmp_path / "map.json.ckpt"
    with pytest.raises(CalibrationRefusedError) as info:
        calibrate(drifting_bench(), FAST, checkpoint=ckpt, progress=Progress(stream=None))
    assert isinstance(info.value, CalibrationError)  # callers catching the old type still do
    assert not ckpt.exists()
    line = str(info.value)
    assert "\n" not in line
    assert f"this run's checkpoint {ckpt} was removed" in line


@pytest.mark.slow  # 23 s in the quick suite at load 10-18 (issue 29)
def test_lumion_calibrate_exits_refused_with_a_hint_that_says_what_to_do(tmp_path, capsys, monkeypatch):
    import lab_scripts.cmd_calibrate as cmd

    def bench(args):
        args.effective_seed = 7
        return drifting_bench()

    monkeypatch.setattr(cmd, "open_bench", bench)
    out = tmp_path / "map.json"
    # --points 12 --refine-points 16 as FAST; the command's Options also measure crosstalk
    code = main(["calibrate", "--bench", "sim", "--out", str(out), "--points", "12", "--refine-points", "16",
                 "--verify-routes", "0", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == EXIT_REFUSED == 6
    error = json.loads(captured.out)
    assert (error["kind"], error["exit_code"], error["type"]) == ("refused", 6, "CalibrationRefusedError")
    assert "refused" in error["error"]
    assert "let its temperature settle" in error["hint"]
    assert "calibrate again" in error["hint"]
    assert "fix the file" not in error["hint"]
    assert captured.err.count("\n") == 1
    assert not out.exists()
    assert not (tmp_path / "map.json.ckpt").exists()

"""`lumion demo` and `lumion failover` count a recovery's heaters one way: the channels whose
drive current changes (issue 29: the demo said "24 heaters written", failover "6 heaters changed")."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from lab_scripts.cli import main
from lab_scripts.common import recovery_changes
from lab_scripts.errors import EXIT_UNVERIFIED
from photonics.configuration import Configuration
from photonics.topology import smartlight

CHANGES = re.compile(r"\d+ TBUs and \d+ heaters changed \([^)]*\)")


def text_of(capsys, argv, code: int = 0) -> str:
    assert main(argv) == code
    return capsys.readouterr().out


def currents(path, mesh) -> np.ndarray:
    conf = Configuration.from_dict(json.loads(path.read_text())["configuration"], mesh)
    return np.asarray(IdealMap(mesh.n_heaters).currents_for(conf, 24.0))


@pytest.mark.slow
def test_failover_counts_the_heaters_whose_current_changes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text_of(capsys, ["failover", "--out", "before.json"])  # the ring, placed, nothing failed
    line = text_of(capsys, ["failover", "--plan", "before.json", "--fail", "gpu2", "--out", "after.json"])
    mesh = smartlight()
    moved = np.flatnonzero(np.abs(currents(tmp_path / "after.json", mesh)
                                  - currents(tmp_path / "before.json", mesh)) > 1e-9)
    n_tbus = len(json.loads(text_of(capsys, ["failover", "--plan", "before.json", "--fail", "gpu2", "--json"])
                            )["changed_tbus"])
    assert recovery_changes(n_tbus, len(moved), "mA", "ideal") in line


@pytest.mark.slow
def test_demo_and_failover_say_the_same_of_the_same_failure(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo = CHANGES.findall(text_of(capsys, ["demo", "--no-calibrate", "--fail", "gpu2", "--out", "demo"],
                                      EXIT_UNVERIFIED))  # the ideal map: light finds links off
    failover = CHANGES.findall(text_of(capsys, ["failover", "--fail", "gpu2"]))
    assert len(demo) == 1
    assert demo == failover  # both through the ideal map here: same count, same words


def test_a_calibrated_map_says_why_more_heaters_than_tbus_change():
    line = recovery_changes(6, 24, "mA", "calibrated")
    assert line.startswith("6 TBUs and 24 heaters changed (heater currents, calibrated map")
    assert "crosstalk" in line
    assert "phases" in recovery_changes(6, 6, "rad", "ideal")

"""Issue 26 item 3: an open or shorted heater is found from the driver's read-back, named as such
in the map (with its cause), routed around and never driven."""

import json

import numpy as np
import pytest

from calibration.bench import HeaterReadback
from calibration.electrical import PROBE_MA, check_heaters, classify
from calibration.map import SCHEMA_VERSION, CalibrationError, CalibrationMap
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.heater_device import OFFSET_CLIP, Readback
from photonics.configuration import Configuration
from photonics.fabric.plan import failures_with_map
from photonics.topology import hexagonal

FAST = Options(points=12, refine_points=16, crosstalk_repeats=0)
MESH = hexagonal(1, 2)


@pytest.fixture(scope="module")
def open_run():
    """hex 1x2 (11 TBUs), seed 9100, heater channel 5 (tbu 2, bottom) open."""
    chip = Chip(MESH, 9100, clock=lambda: 0.0, heater_faults={5: "open-heater"})
    return chip, calibrate(DirectBench(chip), FAST, progress=Progress(stream=None)).cmap


def test_an_open_heater_is_named_with_its_cause_not_as_a_dead_or_stuck_tbu(open_run):
    _chip, cmap = open_run
    assert cmap.failed == {2: "open-heater"}  # light did not blame it, nor any other TBU
    assert cmap.heater_faults == {5: "open-heater"}
    [warning] = [w for w in cmap.quality["warnings"] if "open-heater" in w]
    cause = "failed (open-heater): its bottom heater (channel 5) is open"
    assert warning.startswith(f"{MESH.tbu_names[2]}: {cause}")
    assert "bond" in warning
    assert "recalibrate" in warning
    assert cmap.faulty_heaters() == {5: f"{MESH.tbu_names[2]} bottom heater (channel 5): open-heater"}


def test_an_open_heaters_tbu_is_routed_around_and_never_driven(open_run, tmp_path):
    _, cmap = open_run
    again = CalibrationMap.load(cmap.save(tmp_path / "m.json"))
    assert again.heater_faults == {5: "open-heater"}
    assert again.failed == {2: "open-heater"}
    assert failures_with_map(MESH, again, None) == {2: "dead"}  # route --map, place_job, serve
    conf = Configuration(np.full(MESH.n_tbus, 0.5), mesh=MESH)  # asks every TBU for a split
    currents = again.currents_for(conf, 24.0)
    assert currents[4] == currents[5] == 0.0


def test_a_shorted_heater_is_named_shorted():
    chip = Chip(MESH, 9101, clock=lambda: 0.0, heater_faults={14: "shorted-heater"})
    cmap = calibrate(DirectBench(chip), FAST, progress=Progress(stream=None)).cmap
    assert cmap.failed == {7: "shorted-heater"}
    assert cmap.heater_faults == {14: "shorted-heater"}
    [warning] = [w for w in cmap.quality["warnings"] if "shorted-heater" in w]
    assert "top heater (channel 14) is shorted" in warning
    assert "bridged" in warning


@pytest.mark.parametrize("seed", [1, 2, 3, 424242])
def test_no_healthy_heater_is_condemned_through_the_recorded_offsets_and_scatter(seed):
    bench = DirectBench(Chip(MESH, seed, clock=lambda: 0.0))
    assert check_heaters(bench) == []
    assert not bench.currents().any()  # the check leaves every heater at zero


def test_the_verdicts_hold_at_the_largest_offsets_and_ten_times_the_scatter():
    worst = Readback(current_offset_mean_ma=-OFFSET_CLIP["mA"], current_offset_sd_ma=0.0,
                     current_scatter_ma=0.003, voltage_offset_mean_v=OFFSET_CLIP["V"],
                     voltage_offset_sd_v=0.0, voltage_scatter_v=0.004)
    chip = Chip(MESH, 7, clock=lambda: 0.0, heater_faults={0: "open-heater", 21: "shorted-heater"})
    faults = check_heaters(DirectBench(chip, readback=worst))
    assert [(f.channel, f.kind) for f in faults] == [(0, "open-heater"), (21, "shorted-heater")]


def test_a_probe_the_module_refuses_at_its_compliance_is_an_open_heater():
    zero = HeaterReadback(np.zeros(2), np.zeros(2), np.zeros(2, bool))
    probe = HeaterReadback(np.array([0.26, 0.0]), np.array([PROBE_MA, 0.0]), np.array([False, True]))
    [fault] = classify(zero, probe, PROBE_MA)
    assert (fault.channel, fault.kind, fault.refused) == (1, "open-heater", True)
    assert "refused" in fault.evidence()


def test_an_open_heater_does_not_heat_its_arm():
    chip = Chip(MESH, 3, clock=lambda: 0.0, model="ideal", heater_faults={4: "open-heater"})
    before = chip.heater_state()
    chip.set_currents(np.where(np.arange(MESH.n_heaters) == 4, 3.0, 0.0))
    after = chip.heater_state()
    assert after.phi_top[2] == before.phi_top[2]
    assert after.phi_bot[2] == before.phi_bot[2]
    flowing, volts = chip.electrical(12.0)
    assert flowing[4] < 0.05
    assert volts[4] == 12.0


def _map_dict(cmap: CalibrationMap) -> dict:
    return json.loads(json.dumps(cmap.to_dict(), default=float))


def test_map_loader_reads_old_maps_and_refuses_inconsistent_heater_faults(open_run):
    _, cmap = open_run
    data = _map_dict(cmap)
    assert data["version"] == SCHEMA_VERSION == 4  # 4: common phases (calibration.common_phase)
    old = json.loads(json.dumps(data))
    old["version"] = 2
    old["tbus"][2].pop("failed")
    old["heaters"][5].pop("fault")
    assert CalibrationMap.from_dict(old).failed == {}  # a version-2 map still loads
    bad = json.loads(json.dumps(data))
    bad["heaters"][5]["fault"] = "melted"
    with pytest.raises(CalibrationError, match=r"bottom heater \(channel 5\) fault must be open-heater/"):
        CalibrationMap.from_dict(bad)
    orphan = json.loads(json.dumps(data))
    orphan["heaters"][5].pop("fault")
    with pytest.raises(CalibrationError, match=f"{MESH.tbu_names[2]} is failed open-heater but neither"):
        CalibrationMap.from_dict(orphan)


@pytest.mark.slow
def test_short_campaign_names_every_broken_heater(monkeypatch):
    """The trust campaign's heater modes, short (benchmarks/bench_calibration_trust.py runs them long)."""
    import instruments.sim.trust_campaign as campaign

    monkeypatch.setattr(campaign, "smartlight", lambda: MESH)
    seeds = [9110, 9111]  # the benchmark's are 9200+
    outcomes = campaign.run_campaign(("open_heater", "shorted_heater"), seeds, FAST)
    for mode, row in campaign.summarise(outcomes).items():
        assert row["injected"] == 2, mode
        assert row["named_correctly"] == 2, mode
        assert row["wrongly_named"] == 0, mode
        assert row["silent_over_0_1_rad"] == 0, mode
        assert row["routes_within"] == row["routes"] > 0, mode

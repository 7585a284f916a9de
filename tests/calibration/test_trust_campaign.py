"""The short version of benchmarks/bench_calibration_trust.py (issue 26): nothing wrong is silent."""

from dataclasses import replace

import numpy as np
import pytest

from calibration.map import CalibrationError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import run_campaign, summarise
from photonics.topology import hexagonal

FAST = Options(points=12, refine_points=16, crosstalk_repeats=0)


@pytest.mark.slow
def test_short_campaign_names_every_failure_and_leaves_nothing_silent(monkeypatch):
    import instruments.sim.trust_campaign as campaign

    mesh = hexagonal(1, 2)
    monkeypatch.setattr(campaign, "smartlight", lambda: mesh)  # a small chip: seconds, not minutes
    outcomes = run_campaign(("default", "dead_port", "dead_adjacent", "stuck_cross", "drift_1k_per_min"),
                            [9100, 9101], FAST)
    table = summarise(outcomes)
    for mode, row in table.items():
        assert row["silent_over_0_1_rad"] == 0, mode
        assert row["named_correctly"] == row["injected"], mode
        assert row["routes_within"] == row["routes"] > 0, mode
    assert table["default"]["wrongly_named"] == 0
    assert table["default"]["heater_rms_worst_rad"] < 0.05


def test_a_chip_drifting_during_the_run_is_refused_saying_how_much():
    """Issue 26: drift during calibration left wrong phases silently; now light re-checks the
    finished map and a run it disagrees with wholesale is refused in one line. (Drift tracking
    is off here: with it, the references refuse this chip first, for drifting too fast.)"""
    chip = Chip(hexagonal(1, 1), 3, clock=lambda: 0.0)
    chip.set_temperature_profile(lambda t_s: 2.0 * t_s)  # 120 K/min: every early fit has moved
    with pytest.raises(CalibrationError,
                       match=r"refused: light disagrees with \d+ of 6 TBUs .* rad RMS") as info:
        calibrate(DirectBench(chip), replace(FAST, drift_references=0), progress=Progress(stream=None))
    assert "\n" not in str(info.value)


def test_a_tbu_walled_in_by_two_dead_neighbours_is_unreachable_not_wrongly_named():
    """Issue 26: with two adjacent dead TBUs the campaign counted a third, healthy neighbour as
    wrongly named on every seed. Both TBUs on one of its sides are dead, so no light path can
    cross it (nor can a route): naming it is right, and the campaign says so."""
    from instruments.sim.trust_campaign import faults_for, make_chip, unreachable_tbus
    from photonics.topology import smartlight

    chip, injected = make_chip("dead_adjacent", 9000)
    mesh = chip.mesh
    assert sorted(mesh.tbu_names[t] for t in injected) == ["tbu:0.1.3", "tbu:1.0.1"]
    walled = unreachable_tbus(mesh, injected)
    assert [mesh.tbu_names[t] for t in walled] == ["tbu:0.1.2"]
    peer = mesh.peer()
    t = mesh.tbu_index("tbu:0.1.2")
    sides = [{int(peer[4 * t + k]) // 4 for k in pair} for pair in ((0, 1), (2, 3))]
    assert set(injected) in sides  # one whole side of it is dead
    rng = np.random.default_rng(1)
    for _ in range(5):  # one dead TBU never walls another in
        assert unreachable_tbus(smartlight(), faults_for("dead_interior", smartlight(), rng)) == set()


def test_an_aggressor_fit_that_cannot_be_driven_costs_one_victim_its_crosstalk_not_the_run(monkeypatch):
    """Issue 26 campaign, dead_adjacent seed 9201: an aggressor heater's fit (next to two dead
    TBUs) turned over, so no current adds the crosstalk drive; invert_cubic raised and the whole
    calibration died with a traceback. Now that victim keeps the design law, with a warning."""
    from calibration import procedure
    from calibration.heater_map import UnreachableError

    real = procedure.measure_crosstalk
    calls = []

    def once_unreachable(bench, probe, *args, **kwargs):
        calls.append(probe.tbu)
        if len(calls) == 1:
            raise UnreachableError("heaters only add phase: target phases must be >= 0 rad")
        return real(bench, probe, *args, **kwargs)

    monkeypatch.setattr(procedure, "measure_crosstalk", once_unreachable)
    chip = Chip(hexagonal(1, 1), 3, clock=lambda: 0.0)
    opts = Options(points=12, refine_points=16)
    result = calibrate(DirectBench(chip), opts, progress=Progress(stream=None))
    name = chip.mesh.tbu_names[calls[0]]
    assert calls[0] not in result.crosstalk
    assert len(result.crosstalk) == len(set(calls)) - 1
    assert any(w.startswith(f"{name}: crosstalk not measured") for w in result.cmap.quality["warnings"])


@pytest.mark.slow
def test_a_dead_tbu_fitted_through_its_unknown_neighbours_is_named_not_its_healthy_neighbours():
    """Trust campaign dead_interior 9203: the dead tbu:0.0.1's -60 dB leak, seen through its
    uncalibrated neighbour tbu:0.1.3, passed for a fringe in the bootstrap; its healthy
    neighbours tbu:0.0.2 and tbu:0.1.3 then went dark through it and were named dead in its
    place (the dead one ended 'unverified'). A failure seen through a TBU whose own fit crossed
    unknown TBUs now blames that TBU first: only the dead one is named."""
    from instruments.sim.trust_campaign import run_chip

    o = run_chip("dead_interior", 9203, FAST)
    assert o.injected == {"tbu:0.0.1": "dead"}
    assert o.named == 1  # recorded dead, as injected
    assert o.wrongly_named == []
    assert o.unverified == {}
    assert o.silent == []
    assert o.routes_within == o.routes > 0


@pytest.mark.slow
def test_a_tbu_no_calibrated_light_reaches_is_named_and_its_map_programs():
    """Trust campaign dead_adjacent 9201: tbu:2.3.1, walled in by the dead pair, kept a bootstrap
    fit made through them (a heater that could not reach pi: with default options the map could
    program no configuration, could not be saved, and the campaign's route check crashed; with
    these options a neighbour ended 0.1 rad off, unnamed). Now it is recorded dead with the reason,
    and the map programs routes around it."""
    from instruments.sim.trust_campaign import make_chip, tbu_errors

    chip, injected = make_chip("dead_adjacent", 9201)
    bench = DirectBench(chip)
    result = calibrate(bench, FAST, progress=Progress(stream=None))
    cmap = result.cmap
    t = chip.mesh.tbu_index("tbu:2.3.1")
    assert cmap.failed.get(t) == "dead"
    assert any(w.startswith("tbu:2.3.1: failed (dead): no light path of calibrated TBUs reaches it")
               for w in cmap.quality["warnings"])
    assert all(cmap.failed.get(k) == "dead" for k in injected)
    off, _ = tbu_errors(cmap, chip)
    names = chip.mesh.tbu_names
    silent = [names[k] for k in range(chip.mesh.n_tbus) if k not in cmap.failed and off[k] > 0.1]
    assert silent == []
    from photonics.configuration import Configuration

    cmap.currents_for(Configuration.parked(chip.mesh), bench.max_current_ma)  # programs, does not raise


def test_a_route_the_map_cannot_program_is_reported_as_data_not_a_crash(monkeypatch):
    """The campaign's route check died on a map that could program nothing (dead_adjacent 9201):
    now such a route counts as planned, not within, with the map's reason kept."""
    import instruments.sim.trust_campaign as campaign
    from calibration.heater_map import UnreachableError

    chip = Chip(hexagonal(1, 2), 3, clock=lambda: 0.0)
    bench = DirectBench(chip)
    cmap = calibrate(bench, FAST, progress=Progress(stream=None)).cmap

    def unreachable(*args, **kwargs):
        raise UnreachableError("tbu:0.0.1 needs 3.034 rad on heater 2, which reaches only 0.026 rad")

    monkeypatch.setattr(campaign, "measure_route", unreachable)
    planned, within, impossible, refusals = campaign.route_check(bench, cmap, np.random.default_rng(0))
    assert planned == len(refusals) > 0
    assert within == 0
    assert planned + impossible == campaign.ROUTES
    assert all("reaches only 0.026 rad" in r for r in refusals)

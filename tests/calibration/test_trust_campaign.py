"""The short version of benchmarks/bench_calibration_trust.py (issue 26): nothing wrong is silent."""

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
    finished map and a run it disagrees with wholesale is refused in one line."""
    chip = Chip(hexagonal(1, 1), 3, clock=lambda: 0.0)
    chip.set_temperature_profile(lambda t_s: 2.0 * t_s)  # 120 K/min: every early fit has moved
    with pytest.raises(CalibrationError,
                       match=r"refused: light disagrees with \d+ of 6 TBUs .* rad RMS") as info:
        calibrate(DirectBench(chip), FAST, progress=Progress(stream=None))
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

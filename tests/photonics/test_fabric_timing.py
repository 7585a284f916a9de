"""Planned phase switches settle by the first-order heater model with the real largest phase step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from photonics.configuration import Configuration
from photonics.fabric import TimingModel, default_fabric, load_job_toml, plan_phases
from photonics.fabric.timing import configuration_phase_step
from photonics.topology import smartlight

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_configuration_phase_step():
    mesh = smartlight()
    parked = Configuration.parked(mesh)  # every TBU cross: both heaters at 0
    bar = Configuration(np.where(np.arange(mesh.n_tbus) == 3, 0.0, 1.0), mesh=mesh)
    half = Configuration(np.where(np.arange(mesh.n_tbus) == 3, 0.5, 1.0), mesh=mesh)
    assert configuration_phase_step(parked, bar, [6, 7]) == pytest.approx(np.pi)  # cross -> bar
    assert configuration_phase_step(parked, half, [6, 7]) == pytest.approx(np.pi / 2)  # to a 50:50 split
    assert configuration_phase_step(bar, half, [6]) == pytest.approx(np.pi / 2)
    assert configuration_phase_step(parked, bar, [0, 1]) == 0.0  # TBU 0 did not move
    assert configuration_phase_step(parked, bar, []) == 0.0


@pytest.mark.parametrize("tau_ms", [0.010, 0.150])
def test_phase_switch_settle_uses_the_real_step(tau_ms):
    fabric = default_fabric()
    timing = TimingModel(thermal_tau_ms=tau_ms)
    steps = plan_phases(fabric, load_job_toml(EXAMPLES / "tp4-dp2.toml"),
                        heater_map=IdealMap(fabric.mesh.n_heaters), timing=timing)
    for k, s in enumerate(steps):
        prev = steps[k - 1].configuration  # cyclic: the first switch comes from the last
        changed = np.flatnonzero(np.abs(s.heater - steps[k - 1].heater) > 1e-4)
        step = configuration_phase_step(prev, s.configuration, changed.tolist())
        assert step == pytest.approx(np.pi)  # bar <-> cross switches: a full pi on one arm
        assert s.switch_ms["settle"] == pytest.approx(timing.settle_ms(step))
        assert s.switch_ms["settle"] == pytest.approx(tau_ms * np.log(100.0))

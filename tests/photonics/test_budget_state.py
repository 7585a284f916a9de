import json

import numpy as np
import pytest

from photonics.budget import (
    Transceiver,
    coupled_fraction,
    link_budget,
    require_budget,
    te_fraction,
    transceiver_profile,
)
from photonics.errors import BudgetError, StateError
from photonics.physics import PhysicsDefaults
from photonics.state import MeshState
from photonics.topology import hexagonal


def test_te_projection_of_jones_vectors():
    assert te_fraction(np.array([1, 0])) == pytest.approx(1.0)
    assert te_fraction(np.array([0, 1])) == pytest.approx(0.0)
    assert te_fraction(np.array([1, 1]) / np.sqrt(2)) == pytest.approx(0.5)
    # TM is suppressed by the coupler's PER, not removed completely
    assert coupled_fraction(np.array([0, 1]), per_db=25) == pytest.approx(10**-2.5)


def test_degree_of_polarization_worst_case():
    assert coupled_fraction(dop=1.0, per_db=30) == pytest.approx(1e-3)
    assert coupled_fraction(dop=0.0, per_db=30) == pytest.approx(0.5 + 0.5e-3)
    with pytest.raises(BudgetError, match=r"\[0, 1\]"):
        coupled_fraction(dop=1.5)
    with pytest.raises(BudgetError, match="exactly one"):
        coupled_fraction()


def test_budget_arithmetic_and_margin():
    b = link_budget(5.0, transceiver_profile("er4lite-100g"))
    # 2 - 2*2.5 - 6 - 5 = -14 dBm received; -21 dBm sensitivity -> 7 dB margin
    assert b.received_dbm == pytest.approx(-14.0)
    assert b.margin_db == pytest.approx(7.0)
    assert b.ok


def test_design_default_sr_lane_cannot_close_any_path():
    b = link_budget(0.5, Transceiver())
    assert not b.ok
    assert "short by" in b.reason
    with pytest.raises(BudgetError, match="port:3->port:9 refused"):
        require_budget(b, "port:3->port:9")


def test_polarization_declarations():
    aligned = link_budget(4.0, Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21))
    drifting = link_budget(4.0, Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21,
                                            polarization="drifting", dop=1.0))
    depolarized = link_budget(4.0, Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21,
                                               polarization="drifting", dop=0.0))
    dual = link_budget(0.0, Transceiver(tx_power_dbm=10, rx_sensitivity_dbm=-30,
                                        polarization="dual"))
    assert aligned.ok
    assert aligned.polarization_loss_db == 0
    assert not drifting.ok
    assert drifting.polarization_loss_db == pytest.approx(25.0)
    assert depolarized.polarization_loss_db == pytest.approx(3.0, abs=0.02)
    assert not dual.ok
    assert "polarization channel" in dual.reason
    with pytest.raises(BudgetError, match="polarization must be one of"):
        Transceiver(polarization="circular")


def test_budget_uses_configured_defaults():
    better = PhysicsDefaults(fiber_to_chip_loss_db=1.8, access_routing_loss_db=5.0)
    b = link_budget(2.0, Transceiver(), defaults=better, required_margin_db=0.0)
    assert b.received_dbm == pytest.approx(1 - 3.6 - 5 - 2)


def test_state_json_round_trip_and_errors(tmp_path):
    mesh = hexagonal(1, 2)
    data = {"schema": "lumion.state", "version": 1, "default": "cross",
            "tbus": {"tbu:0.0.1": "bar", "tbu:0.0.2": {"split": 0.5},
                     "tbu:0.0.3": {"top": 1.0, "bot": 2.0}}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    s = MeshState.load(path, mesh)
    assert s.phi_top[1] - s.phi_bot[1] == pytest.approx(np.pi)
    assert (s.phi_top[3], s.phi_bot[3]) == (1.0, 2.0)
    assert s.phi_top[0] == s.phi_bot[0] == 0.0
    back = MeshState.from_dict(s.to_dict(mesh), mesh)
    np.testing.assert_array_equal(back.phi_top, s.phi_top)
    data["tbus"]["tbu:0.0.1"] = "sideways"
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match="give 'bar', 'cross'"):
        MeshState.load(path, mesh)
    with pytest.raises(StateError, match="shape"):
        MeshState(np.zeros(3), np.zeros(4))
    with pytest.raises(StateError, match="finite"):
        MeshState(np.array([np.nan]), np.zeros(1))

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from photonics.budget import (
    DEFAULT_TRANSCEIVER,
    TRANSCEIVER_PROFILES,
    Transceiver,
    band_name,
    check_band,
    coupled_fraction,
    link_budget,
    require_budget,
    signal_fraction,
    te_fraction,
    transceiver_profile,
)
from photonics.errors import BudgetError, StateError
from photonics.physics import PhysicsDefaults
from photonics.state import MeshState
from photonics.tolerances import REQUIRED_MARGIN_DB
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
    b = link_budget(5.0, transceiver_profile("dwdm-10g-zr"))
    # 0 - 2*2.5 - 6 - 5 = -16 dBm received; -23 dBm sensitivity -> 7 dB margin
    assert b.received_dbm == pytest.approx(-16.0)
    assert b.margin_db == pytest.approx(7.0)
    assert b.ok


def test_a_margin_a_hair_short_is_refused_with_how_far_it_falls_short():
    """A margin 1e-6 dB under the 3 dB required (session 42's audit: `lumion route --connect 1:4
    --transceiver dwdm-10g-er`) was refused as "short by 0.00 dB" beside two equal powers."""
    b = link_budget(9.0 + 1e-6, transceiver_profile("dwdm-10g-zr"))  # margin 3 dB - 1e-6
    assert not b.ok
    assert "short by 0.00 dB" not in b.reason
    assert "short by 1e-06 dB (margin 2.999999 dB)" in b.reason
    assert "short by 1.03 dB" in link_budget(10.03, transceiver_profile("dwdm-10g-zr")).reason


def test_weak_c_band_lane_cannot_close_a_typical_path():
    b = link_budget(4.0, transceiver_profile("dwdm-10g-er"))  # 15 dB of budget, 11 spent off-mesh
    assert not b.ok
    assert "short by" in b.reason
    with pytest.raises(BudgetError, match="port:3->port:9 refused"):
        require_budget(b, "port:3->port:9")


def test_polarization_declarations():
    aligned = link_budget(4.0, Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21))
    depolarized = link_budget(4.0, Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21,
                                               polarization="drifting", dop=0.0))
    dual = link_budget(0.0, Transceiver(tx_power_dbm=10, rx_sensitivity_dbm=-30,
                                        polarization="dual"))
    assert aligned.ok
    assert aligned.polarization_loss_db == 0
    # only the TE half is signal: exactly 3.01 dB, the TM leak through the PER is not counted
    assert depolarized.polarization_loss_db == pytest.approx(10 * np.log10(2), abs=1e-12)
    assert not dual.ok
    assert "polarization channel" in dual.reason
    with pytest.raises(BudgetError, match="polarization must be one of"):
        Transceiver(polarization="circular")


def test_budget_uses_configured_defaults():
    better = PhysicsDefaults(fiber_to_chip_loss_db=1.8, access_routing_loss_db=5.0)
    b = link_budget(2.0, Transceiver(tx_power_dbm=1.0), defaults=better, required_margin_db=0.0)
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


# -- polarization rule: TM leaking in is not signal ------------------------------------------
@pytest.mark.parametrize("per_db", [15.0, 25.0, 40.0])
def test_fully_polarized_drifting_source_is_refused_whatever_the_per(per_db):
    # Worst case: the drifting polarization arrives all TM. Its TE projection is zero and
    # the TM that leaks through the coupler is not routed by the TE-calibrated mesh, so no
    # PER and no transmitter power can close the link (old code priced it at the PER).
    loud = Transceiver(tx_power_dbm=30, rx_sensitivity_dbm=-40, polarization="drifting", dop=1.0)
    b = link_budget(0.0, loud, defaults=PhysicsDefaults(polarization_extinction_db=per_db))
    assert not b.ok
    assert "fully polarized drifting" in b.reason
    assert "aligned" in b.reason  # says what to do
    assert b.polarization_loss_db == float("inf")
    with pytest.raises(BudgetError, match="refused: fully polarized drifting"):
        require_budget(b)


def test_partially_polarized_drifting_source_budgets_its_unpolarized_te_half():
    lane = Transceiver(tx_power_dbm=2, rx_sensitivity_dbm=-21, polarization="drifting", dop=0.5)
    b = link_budget(1.0, lane)
    assert b.polarization_loss_db == pytest.approx(-10 * np.log10(0.25), abs=1e-12)  # 6.02 dB
    assert b.ok
    assert signal_fraction(dop=0.5) == pytest.approx(0.25)
    assert signal_fraction(np.array([1, 1j]) / np.sqrt(2)) == pytest.approx(0.5)
    # the physical power entering still includes the TM leak; the signal does not
    assert coupled_fraction(dop=0.5, per_db=25) > signal_fraction(dop=0.5)


# -- transceiver bands --------------------------------------------------------------------------
def test_every_profile_carries_wavelengths_and_defaults_are_c_band():
    lo, hi = PhysicsDefaults().band_nm
    assert (lo, hi) == (1530.0, 1565.0)
    for name, t in TRANSCEIVER_PROFILES.items():
        assert t.wavelengths_nm, name
        assert t.name == name
    for name in (DEFAULT_TRANSCEIVER, Transceiver().name):
        assert all(lo <= w <= hi for w in transceiver_profile(name).wavelengths_nm)
    assert band_name(1550.12) == "C-band"
    assert band_name(1300.05) == "O-band"


@pytest.mark.parametrize(("name", "band"), [("er4lite-100g", "O-band"), ("sr-100g", "850 nm")])
def test_out_of_band_transceiver_is_refused_with_the_reason(name, band):
    lane = transceiver_profile(name)
    with pytest.raises(BudgetError, match=rf"{name}.*{band}.*outside the chip's band 1530-1565 nm.*"
                                          r"use a C-band lane \(profiles: dwdm-10g-zr"):
        link_budget(1.0, lane)
    with pytest.raises(BudgetError, match="outside the chip's band"):
        check_band(lane)
    # a chip declared for another band accepts it
    check_band(lane, defaults=PhysicsDefaults(band_nm=(800.0, 1400.0)))


def test_receiver_must_detect_the_transmitted_wavelength():
    c_band = transceiver_profile("dwdm-10g-zr")
    o_band_rx = transceiver_profile("er4lite-100g")  # its demultiplexer passes O-band lanes only
    with pytest.raises(BudgetError, match="receiver 'er4lite-100g' detects"):
        link_budget(1.0, c_band, o_band_rx)
    with pytest.raises(BudgetError, match="lane wavelength"):
        Transceiver(wavelengths_nm=())


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("photonics", "calibration", "instruments", "controlplane", "campaigns", "lab_scripts")


def _number(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _literal_margins(path: Path) -> list[str]:
    """Where a margin parameter, field or option of ``path`` defaults to a number written there."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
            found += [f"{node.name}({arg.arg}=...)" for arg, d in pairs
                      if "margin_db" in arg.arg and _number(d)]
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id == "required_margin_db" and _number(node.value)):
            found.append("field required_margin_db")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and node.args[0].value == "--margin-db"):
            found += ["--margin-db" for k in node.keywords
                      if k.arg == "default" and _number(k.value)]
    return [f"{path.relative_to(ROOT)}: {f}" for f in found]


def test_the_required_margin_is_one_constant():
    """Every default link margin is REQUIRED_MARGIN_DB (its reason is there): a literal 3.0 in one of
    the ~15 functions that take one would let router, fabric and program drift apart unseen."""
    literal = [hit for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
               for hit in _literal_margins(path)]
    assert not literal, literal
    assert link_budget(5.0).required_margin_db == REQUIRED_MARGIN_DB == 3.0

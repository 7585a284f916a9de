"""Calibration maps: JSON round trip, refusal of bad maps, atomic saves, inversion."""

import json

import numpy as np
import pytest

from calibration.heater_map import HeaterMap, UnreachableError
from calibration.map import SCHEMA_VERSION, CalibrationError, CalibrationMap, mesh_signature
from calibration.model import crosstalk_matrix, heater_positions
from photonics.configuration import Configuration
from photonics.topology import hexagonal


@pytest.fixture
def mesh():
    return hexagonal(1, 2)


def make_map(mesh, chip_id="chip-A", fraction=0.01, seed=0):
    rng = np.random.default_rng(seed)
    n = mesh.n_heaters
    eta = np.full(n, np.pi / 1.3)
    rho2 = 0.6 * (1 + 0.05 * rng.standard_normal(n))
    return CalibrationMap(
        chip_id=chip_id, mesh=mesh_signature(mesh), delta=rng.uniform(0, 2 * np.pi, mesh.n_tbus),
        rho2=rho2, rho3=0.02 * rho2, eta=eta,
        crosstalk=crosstalk_matrix(heater_positions(mesh.tbu_xy), eta, fraction),
        created="2024-01-01T00:00:00+00:00", tbu_names=mesh.tbu_names,
        quality={"fit_rms_residual": 1.0, "sigma_delta_rad": np.full(mesh.n_tbus, 1e-3)},
        nearest_fraction=fraction, cutoff_tbu=1.05,
    )


def test_round_trip(tmp_path, mesh):
    cmap = make_map(mesh)
    path = cmap.save(tmp_path / "map.json")
    back = CalibrationMap.load(path, chip_id="chip-A", mesh=mesh)
    assert isinstance(back, HeaterMap)
    np.testing.assert_allclose(back.delta, cmap.delta)
    np.testing.assert_allclose(back.rho3, cmap.rho3)
    assert (back.crosstalk != cmap.crosstalk).nnz == 0
    data = json.loads(path.read_text())
    assert data["schema"] == "lumion.calibration"
    assert data["version"] == SCHEMA_VERSION == 4
    assert data["mesh"] == {"kind": "hexagonal", "rows": 1, "cols": 2, "n_tbus": 11, "n_heaters": 22}
    conf = Configuration.parked(mesh)
    np.testing.assert_allclose(back.currents_for(conf, 24.0), cmap.currents_for(conf, 24.0))


def test_refuses_other_chip_and_mesh(tmp_path, mesh):
    path = make_map(mesh).save(tmp_path / "map.json")
    with pytest.raises(CalibrationError, match="chip-A"):
        CalibrationMap.load(path, chip_id="chip-B")
    with pytest.raises(CalibrationError, match="mesh"):
        CalibrationMap.load(path, mesh=hexagonal(2, 2))


def test_a_map_on_another_mesh_names_both_as_mesh_takes_them(tmp_path, mesh):
    # it printed both meshes as dicts, and the mesh the map was made for nowhere as --mesh takes it
    path = make_map(mesh).save(tmp_path / "map.json")
    with pytest.raises(CalibrationError, match=r"map\.json was made for mesh hex:1x2 \(11 TBUs\), not for "
                                               r"smartlight \(71 TBUs\); give the mesh it was made for "
                                               r"\(--mesh hex:1x2\)"):
        CalibrationMap.load(path, mesh=hexagonal(3, 6))


def test_refuses_unknown_version_and_corruption(tmp_path, mesh):
    path = make_map(mesh).save(tmp_path / "map.json")
    data = json.loads(path.read_text())
    data["version"] = SCHEMA_VERSION + 1
    (tmp_path / "v2.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="version"):
        CalibrationMap.load(tmp_path / "v2.json")
    (tmp_path / "cut.json").write_text(path.read_text()[:500])
    with pytest.raises(CalibrationError, match="corrupt"):
        CalibrationMap.load(tmp_path / "cut.json")
    data["version"] = SCHEMA_VERSION
    data["heaters"] = data["heaters"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="malformed"):
        CalibrationMap.load(tmp_path / "short.json")
    data = json.loads(path.read_text())
    data["heaters"][0]["rho2"] = -1.0
    (tmp_path / "neg.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="positive"):
        CalibrationMap.load(tmp_path / "neg.json")
    with pytest.raises(CalibrationError, match="not found"):
        CalibrationMap.load(tmp_path / "missing.json")


def test_failed_save_leaves_old_file(tmp_path, mesh):
    path = make_map(mesh).save(tmp_path / "map.json")
    before = path.read_bytes()
    bad = make_map(mesh, chip_id="chip-A", seed=1)
    bad.rho2[3] = np.nan
    with pytest.raises(CalibrationError):
        bad.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.json"]


def test_inversion_hits_targets_with_crosstalk(mesh):
    cmap = make_map(mesh, fraction=0.03)
    rng = np.random.default_rng(2)
    conf = Configuration(rng.uniform(0, 1, mesh.n_tbus))
    currents = cmap.currents_for(conf, 24.0)
    theta = cmap.differential(currents)
    want = 2 * np.arccos(np.sqrt(conf.cross_fraction))
    err = np.angle(np.exp(1j * (theta - want)))
    assert np.max(np.abs(err)) < 1e-6
    # One heater per TBU is driven.
    assert np.all((currents[0::2] == 0) | (currents[1::2] == 0))
    raw = cmap.currents_for(conf, 24.0, compensate=False)
    err_raw = np.angle(np.exp(1j * (cmap.differential(raw) - want)))
    assert np.max(np.abs(err_raw)) > 0.01


def test_unreachable_target(mesh):
    cmap = make_map(mesh)
    conf = Configuration(np.full(mesh.n_tbus, 0.3))
    with pytest.raises(UnreachableError, match="mA limit"):
        cmap.currents_for(conf, 0.5)


def test_wrong_size_configuration(mesh):
    with pytest.raises(CalibrationError, match="TBUs"):
        make_map(mesh).currents_for(Configuration(np.ones(3)), 24.0)


def test_reach_of_a_heater_with_negative_tempco(mesh):
    """A falling curve's reach is its peak, not the phase at the limit (which can be < 0)."""
    from dataclasses import replace

    cmap = make_map(mesh)
    cmap = replace(cmap, rho3=np.full(mesh.n_heaters, -0.05))  # peaks at 8 mA, 12.8 rad
    conf = Configuration(np.full(mesh.n_tbus, 0.3))
    currents = cmap.currents_for(conf, 24.0)
    assert (currents <= 8.0).all()  # solved on the rising side of the curve
    err = np.angle(np.exp(1j * (cmap.differential(currents) - 2 * np.arccos(np.sqrt(0.3)))))
    assert np.max(np.abs(err)) < 1e-6
    with pytest.raises(UnreachableError, match=r"reaches only 0\.[0-9]+ rad at the 1\.0 mA limit"):
        cmap.currents_for(conf, 1.0)


@pytest.mark.parametrize(("heater", "key", "value", "says"), [
    (0, "rho2", 1e300, "tbu:0.0.0 top heater (channel 0) rho2 = 1e+300"),
    (3, "rho3", -5.0, "tbu:0.0.1 bottom heater (channel 3) rho3 = -5"),
    (2, "eta_rad_per_mw", 1e-6, "tbu:0.0.1 top heater (channel 2) eta_rad_per_mw"),
])
def test_refuses_absurd_coefficients(tmp_path, mesh, heater, key, value, says):
    data = make_map(mesh).to_dict()
    data["heaters"][heater][key] = value
    (tmp_path / "absurd.json").write_text(json.dumps(json.loads(json.dumps(data, default=float))))
    with pytest.raises(CalibrationError, match="outside what a thermo-optic heater can do") as info:
        CalibrationMap.load(tmp_path / "absurd.json")
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_refuses_absurd_crosstalk(tmp_path, mesh):
    path = make_map(mesh).save(tmp_path / "map.json")
    data = json.loads(path.read_text())
    data["crosstalk"]["entries"][0][2] = 50.0  # rad/mW: 20x the heater's own phase
    (tmp_path / "xt.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError,
                       match=r"crosstalk on tbu:0\.0\.0 top heater .* of that heater.s own phase"):
        CalibrationMap.load(tmp_path / "xt.json")


@pytest.mark.parametrize("value", [None, "NaN", "Infinity"])
def test_non_finite_value_is_named(tmp_path, mesh, value):
    path = make_map(mesh).save(tmp_path / "map.json")
    text = path.read_text()
    data = json.loads(text)
    data["heaters"][5]["rho3"] = "__X__"
    bad = json.dumps(data).replace('"__X__"', "null" if value is None else value)
    (tmp_path / "nan.json").write_text(bad)
    with pytest.raises(CalibrationError,
                       match=r"tbu:0\.0\.2 bottom heater \(channel 5\) rho3 is not a finite number") as info:
        CalibrationMap.load(tmp_path / "nan.json")
    assert "NoneType" not in str(info.value)


def write(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_refuses_a_delta_that_is_no_phase(tmp_path, mesh):
    """1e300 rad passed the loader (it is finite) and programmed nonsense: refused, by name."""
    data = json.loads(make_map(mesh).save(tmp_path / "map.json").read_text())
    data["tbus"][4]["delta_rad"] = 1e300
    with pytest.raises(CalibrationError) as info:
        CalibrationMap.load(write(tmp_path, data))
    msg = str(info.value)
    assert f"{mesh.tbu_names[4]} delta_rad = 1e+300 is not a phase" in msg
    assert "\n" not in msg


def test_refuses_duplicated_crosstalk_entries(tmp_path, mesh):
    """Two entries for one heater pair used to be summed silently (doubling that crosstalk)."""
    data = json.loads(make_map(mesh).save(tmp_path / "map.json").read_text())
    i, j, _ = data["crosstalk"]["entries"][3]
    data["crosstalk"]["entries"].append(data["crosstalk"]["entries"][3])
    with pytest.raises(CalibrationError, match="is given twice") as info:
        CalibrationMap.load(write(tmp_path, data))
    msg = str(info.value)
    assert mesh.tbu_names[int(i) // 2] in msg
    assert mesh.tbu_names[int(j) // 2] in msg
    assert "\n" not in msg
    data["crosstalk"]["entries"][-1] = [int(i), int(i), 0.01]
    with pytest.raises(CalibrationError, match="on itself"):
        CalibrationMap.load(write(tmp_path, data))


def test_unverified_tbus_round_trip_and_are_avoided(tmp_path, mesh):
    """An unverified TBU is stored with its disagreement and routed around as a dead one."""
    cmap = make_map(mesh)
    cmap = CalibrationMap(**{**cmap.__dict__, "failed": {2: "unverified", 5: "bar"},
                             "disagreement": {2: 3.09}})
    back = CalibrationMap.load(cmap.save(tmp_path / "map.json"), mesh=mesh)
    assert back.failed == {2: "unverified", 5: "bar"}
    assert back.unverified_tbus() == {mesh.tbu_names[2]: pytest.approx(3.09)}
    assert back.failed_tbus() == {mesh.tbu_names[2]: "dead", mesh.tbu_names[5]: "bar"}
    assert back.failed_tbus(avoid_unverified=False) == {mesh.tbu_names[5]: "bar"}
    currents = back.currents_for(Configuration.parked(mesh), 24.0)
    assert currents[10] == currents[11] == 0.0  # a broken TBU is never driven
    assert currents[4] + currents[5] > 0  # an unverified one keeps its fit (parked by it)


def test_reads_version_1_maps(tmp_path, mesh):
    data = json.loads(make_map(mesh).save(tmp_path / "map.json").read_text())
    data["version"] = 1
    back = CalibrationMap.load(write(tmp_path, data))
    np.testing.assert_allclose(back.delta, make_map(mesh).delta)

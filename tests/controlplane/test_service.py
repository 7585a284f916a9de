"""ControlPlane behaviour a client relies on (in-process, simulated bench over its real transports)."""

from __future__ import annotations

import numpy as np
import pytest

from controlplane.errors import ServiceError
from controlplane.service import ControlPlane
from controlplane.store import Store
from photonics.fabric import Accelerator, default_fabric, make_fabric
from photonics.topology import smartlight


def test_live_margins_come_from_telemetry_readings(cp):
    job = cp.place_job(count=4)
    receiver = job["job"]["links"][0][1]
    assert "live_margin_db" not in cp.status()["links"][0]
    cp.record_live(receiver, rx_power_dbm=-9.5, los=False)
    link = next(lk for lk in cp.status()["links"] if lk["link"].endswith(f"->{receiver}"))
    sensitivity = cp.fabric.lane(cp.fabric.accelerator(receiver).rx[0]).rx_sensitivity_dbm
    assert link["live_rx_power_dbm"] == -9.5
    assert link["live_margin_db"] == pytest.approx(-9.5 - sensitivity)
    assert link["los"] is False


def test_a_second_job_keeps_the_first_jobs_routes_and_heaters(cp, bench):
    first = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    routes = [lk.route for lk in cp.state.plan.links]
    heaters = cp.state.currents.copy()
    held = sorted({t for r in routes for t in r.tbus})
    channels = np.concatenate([2 * np.array(held), 2 * np.array(held) + 1])
    cp.place_job(accelerators=["gpu4", "gpu5", "gpu6", "gpu7"])
    assert [lk.route for lk in cp.state.plan.links[:4]] == routes
    assert np.array_equal(cp.state.currents[channels], heaters[channels])
    keys = ("link", "src", "dst", "n_tbus")
    assert [{k: lk[k] for k in keys} for lk in cp.job(first["id"])["links"]] == [
        {k: lk[k] for k in keys} for lk in first["links"]
    ]
    # the chip itself holds the committed currents
    chip = bench.sim.heater.currents()[: cp.mesh.n_heaters]
    assert np.abs(chip - cp.state.currents).max() < 0.005


def test_deleting_a_job_parks_only_its_own_tbus(cp):
    a = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    cp.place_job(accelerators=["gpu4", "gpu5", "gpu6", "gpu7"])
    kept = [lk.route for lk in cp.state.plan.links[4:]]
    kept_tbus = sorted({t for r in kept for t in r.tbus})
    before = cp.state.currents.copy()
    cp.delete_job(a["id"])
    assert [lk.route for lk in cp.state.plan.links] == kept
    ch = np.concatenate([2 * np.array(kept_tbus), 2 * np.array(kept_tbus) + 1])
    assert np.array_equal(cp.state.currents[ch], before[ch])
    assert set(cp.status()["spares_free"]) == {"spare0", "spare1"}


def test_requests_the_rack_cannot_meet_are_refused_without_side_effects(cp):
    cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    intents = cp.store.query("SELECT COUNT(*) FROM intents")[0][0]
    for kwargs, kind in [
        ({"accelerators": ["gpu3", "gpu4"]}, "impossible"),
        ({"accelerators": ["spare0", "gpu4"]}, "impossible"),
        ({"count": 9}, "impossible"),
        ({"accelerators": ["gpu4", "gpu9"]}, "input"),
        ({"accelerators": ["gpu4", "gpu5"], "pattern": "torus"}, "input"),
    ]:
        with pytest.raises(ServiceError) as err:
            cp.place_job(**kwargs)
        assert err.value.kind == kind
    assert cp.store.query("SELECT COUNT(*) FROM intents")[0][0] == intents
    assert len(cp.status()["jobs"]) == 1


def test_all_to_all_with_enough_lanes(bench, tmp_path):
    """Three accelerators with two lanes each: every ordered pair as its own circuit.

    (With the lanes in three neighbouring slots the integer program proves the six circuits
    cannot all be routed at once; this wiring can.)
    """
    ports = [(1, 37, 0, 36), (5, 9, 4, 8), (13, 17, 12, 16)]
    accs = [Accelerator(f"gpu{k}", (t1, t2), (r1, r2)) for k, (t1, t2, r1, r2) in enumerate(ports)]
    accs.append(Accelerator("spare0", (21,), (20,), spare=True))
    fabric = make_fabric(smartlight(), accs, mesh_spec="smartlight", name="two-lane")
    cp = ControlPlane(Store(tmp_path / "cp.db"), bench, fabric)
    try:
        job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2"], pattern="all-to-all")
        assert job["pattern"] == "all-to-all"
        assert len(job["links"]) == 6
        assert {lk["link"] for lk in job["links"]} == {
            f"{a}->{b}" for a in ("gpu0", "gpu1", "gpu2") for b in ("gpu0", "gpu1", "gpu2") if a != b
        }
    finally:
        cp.close()


def test_another_fabric_on_a_recorded_database_is_refused(bench, tmp_path):
    ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric()).close()
    other = make_fabric(
        smartlight(),
        [Accelerator("a", (1,), (0,)), Accelerator("b", (5,), (4,))],
        mesh_spec="smartlight",
        name="other",
    )
    with pytest.raises(ServiceError, match="already runs fabric"):
        ControlPlane(Store(tmp_path / "cp.db"), bench, other)


def test_a_fitted_map_is_recorded_and_kept_across_restarts(bench, tmp_path):
    from calibration.heater_map import IdealMap
    from calibration.map import CalibrationMap
    from tests.controlplane.rack import oracle_map

    fitted = oracle_map(bench.sim.chip)
    bench.controller.heater_map = fitted
    try:
        cp = ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric())
        assert cp.status()["chips"][0]["heater_map"] == "fitted"
        job = cp.place_job(count=4)
        cp.close()
        bench.controller.heater_map = IdealMap(cp.mesh.n_heaters)  # a restart without --map
        again = ControlPlane(Store(tmp_path / "cp.db"), bench, None)
        assert isinstance(bench.controller.heater_map, CalibrationMap)
        assert again.status()["chips"][0]["heater_map"] == "fitted"
        assert np.allclose(bench.controller.heater_map.rho2, fitted.rho2)
        assert again.job(job["id"])["links"] == job["links"]
        again.close()
    finally:
        bench.controller.heater_map = IdealMap(bench.mesh.n_heaters)

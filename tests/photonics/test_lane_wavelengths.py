"""Every check of a route uses the lane's own wavelength(s), not the chip's 1550 nm centre.

Issue 28: with the coupler slope, an in-band DWDM channel at 1530.33 nm (ITU channel 59)
got an ACR 13-33 dB too optimistic because transmission and ACR were computed at 1550.0
nm whatever the lane. Each entry point (routing, the fabric's evaluate behind placement,
failover, TBU repair, phases and the control plane, and the schedules' own bidirectional
check) is tested against figures computed here independently, by a circuit solve at the
lane's wavelength; each test fails on the old code, which reported the 1550 nm figure.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from controlplane.placement import empty_plan, place
from photonics.budget import CHANNEL_STEP_NM, Transceiver, check_wavelengths_nm
from photonics.circuit import solve
from photonics.errors import BudgetError
from photonics.fabric import (
    Fabric,
    FabricError,
    default_fabric,
    fail_tbu,
    failover,
    links_job,
    parse_job_toml,
    place_job,
    plan_phases,
    ring_job,
    schedule,
)
from photonics.physics import nominal_params
from photonics.routing import check_routes, route_many
from photonics.routing.verify import plan_state
from photonics.topology import smartlight

CH59 = 1530.33  # ITU 100 GHz channel 59 (195.9 THz), in the C band, 20 nm from the centre
CH34 = 1550.12
CH21 = 1560.61
PAIRS = [("port:3", "port:17"), ("port:5", "port:20"), ("port:9", "port:30"), ("port:13", "port:26")]


def _lane(*centres: float, width: float = 0.0) -> Transceiver:
    return Transceiver(name="dwdm-tuned", wavelengths_nm=centres, channel_width_nm=width)


def _acr_at(mesh, plan_conf, routes, wavelength_nm, failed=None):
    """ACR and transmission of every route at one wavelength (the old single-wavelength check)."""
    checks = check_routes(mesh, plan_conf, routes, wavelengths_nm=[wavelength_nm], failed=failed)
    return [c.acr_db for c in checks], [c.transmission_db for c in checks]


def _fabric_on(*centres: float, spare_centre: float | None = None) -> Fabric:
    """The default 8+2 fabric with every lane tuned to ``centres`` (the spares' to another)."""
    fab = default_fabric()
    lanes = {}
    for acc in fab.accelerators:
        c = (spare_centre,) if acc.spare and spare_centre is not None else centres
        for p in (*acc.tx, *acc.rx):
            lanes[p] = _lane(*c)
    return replace(fab, lanes=lanes)


# -- the sample points ---------------------------------------------------------------------
def test_a_channel_is_checked_edge_to_edge_at_the_step():
    w = np.array(check_wavelengths_nm(_lane(CH59, width=0.8)))
    assert w[0] == pytest.approx(CH59 - 0.4)
    assert w[-1] == pytest.approx(CH59 + 0.4)
    assert CH59 in w  # the centre is a point
    assert np.diff(w).max() <= CHANNEL_STEP_NM + 1e-9
    assert check_wavelengths_nm(_lane(CH59)) == (CH59,)  # zero width: the centre alone
    both = check_wavelengths_nm(_lane(CH59, CH34, width=0.8))
    assert len(both) == 2 * len(w)
    assert min(both) < CH59 < CH34 < max(both)
    assert Transceiver().channel_width_nm == 0.8  # the default lane is a 100 GHz DWDM slot
    with pytest.raises(BudgetError, match="channel_width_nm"):
        _lane(CH59, width=-0.1)


# -- routing ---------------------------------------------------------------------------------
def test_route_many_reports_the_acr_at_the_lanes_wavelength():
    """The issue's reproduction: the reported ACR is the one at 1530.33 nm, not at 1550 nm."""
    mesh = smartlight()
    plan = route_many(mesh, PAIRS, transceiver=_lane(CH59))
    routes = [r.route for r in plan.routes]
    acr59, trans59 = _acr_at(mesh, plan.configuration, routes, CH59)
    acr_centre, _ = _acr_at(mesh, plan.configuration, routes, 1550.0)
    assert [r.acr_db for r in plan.routes] == pytest.approx(acr59, abs=1e-9)
    assert [r.transmission_db for r in plan.routes] == pytest.approx(trans59, abs=1e-9)
    assert min(a - b for a, b in zip(acr_centre, acr59, strict=True)) > 10  # the defect: 13-33 dB
    assert all(r.check.acr_wavelength_nm == CH59 for r in plan.routes)


def test_route_many_takes_the_worst_point_across_the_channel():
    mesh = smartlight()
    plan = route_many(mesh, PAIRS, transceiver=_lane(CH59, width=0.8))
    routes = [r.route for r in plan.routes]
    points = np.linspace(CH59 - 0.4, CH59 + 0.4, 33)  # computed here, not by the code under test
    per_point = np.array([_acr_at(mesh, plan.configuration, routes, w)[0] for w in points])
    assert [r.acr_db for r in plan.routes] == pytest.approx(per_point.min(axis=0), abs=1e-9)
    assert all(len(r.check.wavelengths_nm) == 33 for r in plan.routes)
    assert plan.to_dict(mesh)["routes"][0]["n_wavelengths"] == 33


def test_a_dwdm_lane_with_several_channels_is_checked_on_all_of_them():
    mesh = smartlight()
    plan = route_many(mesh, PAIRS, transceiver=_lane(CH59, CH34, CH21))
    routes = [r.route for r in plan.routes]
    acr = np.array([_acr_at(mesh, plan.configuration, routes, w)[0] for w in (CH59, CH34, CH21)])
    trans = np.array([_acr_at(mesh, plan.configuration, routes, w)[1] for w in (CH59, CH34, CH21)])
    assert [r.acr_db for r in plan.routes] == pytest.approx(acr.min(axis=0), abs=1e-9)
    assert [r.transmission_db for r in plan.routes] == pytest.approx(trans.min(axis=0), abs=1e-9)


def test_extra_check_wavelengths_outside_the_band_are_refused():
    from photonics.errors import RoutingError

    with pytest.raises(RoutingError, match="outside the chip's band"):
        route_many(smartlight(), PAIRS[:1], wavelengths_nm=[1310.0])


# -- the fabric: placement, failover, TBU repair, phases -------------------------------------
def _assert_links_at(fabric: Fabric, plan, wavelength_of) -> None:
    """Every link's ACR and transmission equal the single-wavelength check at its TX lane."""
    mesh = fabric.mesh
    for k, lk in enumerate(plan.links):
        acr, trans = _acr_at(mesh, plan.configuration, plan.routes, wavelength_of(lk.route.src),
                             plan.failed_tbus)
        assert lk.acr_db == pytest.approx(acr[k], abs=1e-9), lk.link
        assert lk.transmission_db == pytest.approx(trans[k], abs=1e-9), lk.link


def test_place_job_checks_each_link_at_its_lanes_wavelength():
    fab = _fabric_on(CH59)
    plan = place_job(fab, ring_job(fab.workers))
    _assert_links_at(fab, plan, lambda _p: CH59)
    centre = place_job(default_fabric(), ring_job(fab.workers))  # same routes, lanes at 1550.12
    assert [lk.route for lk in centre.links] == [lk.route for lk in plan.links]
    assert min(lk.acr_db for lk in centre.links) - min(lk.acr_db for lk in plan.links) > 3


def test_mixed_lanes_each_link_at_its_own_transmitters_wavelength():
    fab = _fabric_on(CH34)
    lanes = dict(fab.lanes)
    for name in ("gpu0", "gpu1", "gpu2", "gpu3"):  # half the ring on channel 59
        for p in fab.accelerator(name).tx:
            lanes[p] = _lane(CH59)
    fab = replace(fab, lanes=lanes)
    plan = place_job(fab, ring_job(fab.workers))
    _assert_links_at(fab, plan, lambda p: fab.lane(p).wavelengths_nm[0])


def test_failover_checks_the_spares_links_at_the_spares_wavelength():
    fab = _fabric_on(CH34, spare_centre=CH59)
    job = ring_job(fab.workers)
    rec = failover(fab, job, "gpu2", place_job(fab, job))
    moved = [rec.plan.links[k] for k in rec.rerouted]
    assert any(fab.owner(lk.route.src) == rec.spare for lk in moved)  # the spare transmits
    _assert_links_at(fab, rec.plan, lambda p: fab.lane(p).wavelengths_nm[0])


def test_tbu_repair_checks_links_at_their_lanes_wavelength():
    fab = _fabric_on(CH59)
    plan = place_job(fab, ring_job(fab.workers))
    longest = max(plan.links, key=lambda lk: len(lk.route.hops)).route
    tbu = longest.hops[len(longest.hops) // 2].tbu
    rec = fail_tbu(fab, plan, tbu, "dead")
    _assert_links_at(fab, rec.plan, lambda _p: CH59)


def test_phases_report_the_worst_acr_at_the_lanes_wavelength():
    fab = _fabric_on(CH59)
    job = parse_job_toml('[job]\nname = "tp"\n[[phase]]\nname = "ring"\nkind = "rings"\n'
                         'groups = [["gpu0", "gpu1", "gpu2", "gpu3"]]\n')
    (step,) = plan_phases(fab, job, cyclic=False)
    routes = list(step.configuration.routes)
    acr, _ = _acr_at(fab.mesh, step.configuration, routes, CH59)
    assert step.worst_acr_db == pytest.approx(min(acr), abs=1e-9)


# -- schedules: the bidirectional check -----------------------------------------------------
def _bidirectional_acr(mesh, conf, pairs, wavelength_nm) -> float:
    """Worst ACR over both directions of every pair, solved here at one wavelength."""
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    ends = [p for ab in pairs for p in ab]
    S = solve(mesh, plan_state(conf, params), [wavelength_nm], params, inputs=ends)[0][0]
    power = np.abs(S) ** 2
    partner = dict(pairs) | {b: a for a, b in pairs}
    worst = np.inf
    for k, p in enumerate(ends):
        victims = [q for q in ends if q not in (p, partner[p])]
        worst = min(worst, 10 * np.log10(power[partner[p], k] / power[victims, k].max()))
    return float(worst)


def test_schedule_checks_both_directions_at_the_ports_lanes_wavelength():
    fab = _fabric_on(CH59)
    ports = [p for a in fab.accelerators[:4] for p in a.tx]
    sched = schedule(fab, ports, labelings=2, search_checks=0)
    for c in sched.configs:
        assert c.worst_acr_db == pytest.approx(_bidirectional_acr(fab.mesh, c.configuration, c.pairs, CH59),
                                               abs=1e-9)
    centre = schedule(default_fabric(), ports, labelings=2, search_checks=0)
    assert min(c.worst_acr_db for c in centre.configs) > min(c.worst_acr_db for c in sched.configs)


# -- the control plane ----------------------------------------------------------------------
def test_control_plane_placement_checks_at_the_lanes_wavelength():
    fab = _fabric_on(CH59)
    plan, _ = place(fab, empty_plan(fab, None), links_job([("gpu0", "gpu1"), ("gpu1", "gpu2")], "j1"), None)
    plan, _ = place(fab, plan, links_job([("gpu4", "gpu5")], "j2"), None)
    _assert_links_at(fab, plan, lambda _p: CH59)


# -- the fabric file declares a port's channel ------------------------------------------------
def test_fabric_file_declares_a_ports_dwdm_channel(tmp_path):
    data = default_fabric().to_dict()
    data["ports"] = {"port:1": {"wavelengths_nm": [CH59], "channel_width_nm": 0.4}}
    fab = Fabric.from_dict(data)
    assert fab.lane(1).wavelengths_nm == (CH59,)
    assert fab.lane(1).channel_width_nm == 0.4
    assert fab.lane(5).wavelengths_nm == (CH34,)
    path = tmp_path / "fab.json"
    fab.save(path)
    assert Fabric.load(path).lane(1) == fab.lane(1)
    for bad in ("1530.33", [], [True], {"nm": 1530.33}):
        data["ports"] = {"port:1": {"wavelengths_nm": bad}}
        with pytest.raises(FabricError, match="wavelengths_nm"):
            Fabric.from_dict(data)

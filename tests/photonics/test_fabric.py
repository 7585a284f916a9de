"""The fabric model: files, jobs, placement and hitless failover."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from photonics.configuration import Configuration
from photonics.fabric import (
    Accelerator,
    Fabric,
    FabricError,
    Job,
    TimingModel,
    default_fabric,
    fail_tbu,
    failover,
    held_graph,
    line_job,
    link_ports,
    links_job,
    load_job_toml,
    make_fabric,
    parse_job_toml,
    place_job,
    recovery_timing,
    ring_job,
    route_links,
)
from photonics.routing import check_routes, conflicts
from photonics.topology import hexagonal


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return default_fabric()


@pytest.fixture(scope="module")
def hmap(fabric):
    return IdealMap(fabric.mesh.n_heaters)


@pytest.fixture(scope="module")
def ring_plan(fabric, hmap):
    job = ring_job(fabric.workers)
    return job, place_job(fabric, job, heater_map=hmap)


# -- files ---------------------------------------------------------------------------------
def test_round_trip(tmp_path, fabric):
    path = tmp_path / "fab.json"
    fabric.save(path)
    back = Fabric.load(path)
    assert back.to_dict() == fabric.to_dict()
    assert back.names == fabric.names
    assert back.spares == ("spare0", "spare1")
    assert back.lanes == fabric.lanes


def test_round_trip_port_overrides(tmp_path, fabric):
    data = fabric.to_dict()
    data["ports"] = {"port:1": {"polarization": "drifting", "dop": 0.5}, "port:0": {"transceiver": "sr-100g"}}
    fab = Fabric.from_dict(data)
    assert fab.lane(1).polarization == "drifting"
    assert fab.lane(1).dop == 0.5
    assert fab.lane(0).name == "sr-100g"
    fab.save(tmp_path / "f.json")
    assert Fabric.load(tmp_path / "f.json").lanes == fab.lanes


def test_inline_mesh_round_trip(tmp_path):
    mesh = hexagonal(2, 2)
    fab = make_fabric(mesh, [Accelerator("a", (0,), (1,)), Accelerator("b", (5,), (6,))])
    fab.save(tmp_path / "f.json")
    back = Fabric.load(tmp_path / "f.json")
    assert back.mesh.n_tbus == mesh.n_tbus
    assert back.mesh_spec is None


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(schema="lumion.mesh"), "not a LUMION fabric"),
    (lambda d: d.update(version=7), "unsupported fabric version"),
    (lambda d: d["accelerators"][0].update(tx=["port:99"]), "unknown port"),
    (lambda d: d["accelerators"][1].update(rx=["port:1"]), "bound twice"),
    (lambda d: d["accelerators"][1].update(name="gpu0"), "declared twice"),
    (lambda d: d["accelerators"][0].update(colour="red"), "unknown field"),
    (lambda d: d.update(transceiver="sr-400g"), "unknown transceiver"),
    (lambda d: d.update(ports={"port:2": {"polarization": "aligned"}}), "no lane"),
    (lambda d: d.update(ports={"port:1": {"polarization": "circular"}}), "polarization must be"),
    (lambda d: d.update(mesh="hex:0x3"), "mesh size"),
    (lambda d: d.update(accelerators=[]), "non-empty"),
])
def test_bad_fabric_files(tmp_path, fabric, change, message):
    data = json.loads(json.dumps(fabric.to_dict()))
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FabricError, match=message):
        Fabric.load(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(FabricError, match="not found"):
        Fabric.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(FabricError, match="not valid JSON"):
        Fabric.load(tmp_path / "x.json")


def test_save_is_atomic(tmp_path, fabric, monkeypatch):
    path = tmp_path / "fab.json"
    fabric.save(path)
    before = path.read_text()

    def boom(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        fabric.save(path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["fab.json"]


# -- jobs ----------------------------------------------------------------------------------
def test_job_builders():
    assert ring_job(["a", "b", "c"]).links == (("a", "b"), ("b", "c"), ("c", "a"))
    assert line_job(["a", "b", "c"]).links == (("a", "b"), ("b", "c"))
    assert links_job([["a", "b"], ["b", "a"]]).accelerators == ("a", "b")
    with pytest.raises(FabricError, match="more than once"):
        ring_job(["a", "b", "a"])
    with pytest.raises(FabricError, match="two different"):
        links_job([["a", "a"]])


def test_lanes_run_out(fabric):
    with pytest.raises(FabricError, match="no TX lane left"):
        link_ports(fabric, [("gpu0", "gpu1"), ("gpu0", "gpu2")])
    with pytest.raises(FabricError, match="unknown accelerator"):
        link_ports(fabric, [("gpu0", "gpu9")])


def test_job_toml(tmp_path):
    text = """
[job]
name = "t"
fabric = "fab.json"
[[phase]]
name = "tp"
kind = "rings"
groups = [["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu4", "gpu5", "gpu6", "gpu7"]]
[[phase]]
name = "pp"
kind = "links"
links = [["gpu3", "gpu4"]]
"""
    (tmp_path / "job.toml").write_text(text)
    job = load_job_toml(tmp_path / "job.toml")
    assert job.name == "t"
    assert job.fabric == str(tmp_path / "fab.json")
    assert len(job.phases[0].links) == 8
    assert job.phases[1].links == (("gpu3", "gpu4"),)
    with pytest.raises(FabricError, match="kind must be"):
        parse_job_toml('[[phase]]\nkind = "star"\ngroups = [["a", "b"]]')
    with pytest.raises(FabricError, match="two groups"):
        parse_job_toml('[[phase]]\nkind = "rings"\ngroups = [["a", "b"], ["b", "c"]]')
    with pytest.raises(FabricError, match="not valid TOML"):
        parse_job_toml("[[phase]\n")


# -- placement -----------------------------------------------------------------------------
def test_default_ring_routes_with_margin(fabric, ring_plan):
    job, plan = ring_plan
    assert len(plan.links) == 8
    assert not conflicts(fabric.mesh, plan.routes)
    assert plan.worst_margin_db >= 6.0
    assert all(lk.budget_ok and lk.acr_db > 30 for lk in plan.links)
    # each link joins the right lanes
    for (a, b), lk in zip(job.links, plan.links, strict=True):
        assert lk.route.src == fabric.accelerator(a).tx[0]
        assert lk.route.dst == fabric.accelerator(b).rx[0]


def test_route_links_respects_held(fabric):
    mesh = fabric.mesh
    held = route_links(mesh, [(1, 4), (5, 8)])
    new = route_links(mesh, [(9, 12), (13, 0)], held=held)
    assert not conflicts(mesh, [*held, *new])
    g = held_graph(mesh, held)
    for r in held:  # no arc left through a held TBU port
        for h in r.hops:
            for p in (h.entry, h.exit):
                tb = np.flatnonzero(g.tbu[g.enabled] == h.tbu)
                arcs = g.enabled[tb]
                assert not np.any((g.entry[arcs] == p) | (g.exit[arcs] == p))


# -- failover ------------------------------------------------------------------------------
def _follow_ring(job: Job) -> list[str]:
    nxt = dict(job.links)
    start = job.accelerators[0]
    seen = [start]
    while nxt[seen[-1]] != start:
        seen.append(nxt[seen[-1]])
        assert len(seen) <= len(job.accelerators)
    return seen


@pytest.mark.parametrize("victim", ["gpu0", "gpu3", "gpu5", "gpu7"])
def test_failover_is_hitless(fabric, hmap, ring_plan, victim):
    job, plan = ring_plan
    rec = failover(fabric, job, victim, plan, heater_map=hmap)
    new = rec.plan
    assert rec.spare in fabric.spares
    assert victim not in new.job.accelerators
    assert rec.spare in new.job.accelerators
    # only the links that touched the victim were re-routed
    assert sorted(rec.rerouted) == [i for i, (a, b) in enumerate(job.links) if victim in (a, b)]
    held = [i for i in range(len(job.links)) if i not in rec.rerouted]
    for i in held:
        assert new.links[i].route == plan.links[i].route
        tbus = np.array(plan.links[i].route.tbus)
        assert np.array_equal(new.configuration.cross_fraction[tbus], plan.configuration.cross_fraction[tbus])
        ch = np.concatenate([2 * tbus, 2 * tbus + 1])
        assert np.array_equal(new.heater[ch], plan.heater[ch])
    assert rec.held_unchanged
    # the plan holds exactly the heaters that change, and they are what the map wants
    wanted = hmap.currents_for(new.configuration, 24.0)
    changed = set(np.flatnonzero(new.heater != plan.heater).tolist())
    assert set(rec.program) == changed
    assert changed
    assert all(wanted[ch] == v for ch, v in rec.program.items())
    assert np.array_equal(new.heater, wanted)
    # nothing outside the changed TBUs was written
    assert {ch // 2 for ch in rec.program} <= set(rec.changed_tbus)
    # still a ring, over the same survivors plus the spare
    order = _follow_ring(new.job)
    assert sorted(order) == sorted([*[a for a in job.accelerators if a != victim], rec.spare])
    # the whole new configuration is conflict-free and every link closes
    assert not conflicts(fabric.mesh, new.routes)
    checks = check_routes(fabric.mesh, new.configuration, new.routes)
    assert all(c.transmission_db > -10 for c in checks)
    assert all(lk.budget_ok for lk in new.links)


def test_failover_picks_least_worst_loss(fabric, hmap, ring_plan):
    job, plan = ring_plan
    rec = failover(fabric, job, "gpu3", plan, heater_map=hmap)
    ok = [c for c in rec.candidates if c["ok"]]
    assert len(ok) == 2
    # every link closes, then the largest worst new margin (to 0.01 dB), then fewest TBUs changed
    best = min(ok, key=lambda c: (-round(c["worst_new_margin_db"], 2), c["n_changed_tbus"]))
    assert rec.spare == best["spare"]


def test_failover_timing(fabric, hmap, ring_plan):
    job, plan = ring_plan
    rec = failover(fabric, job, "gpu2", plan, heater_map=hmap)
    t = rec.timing_ms
    assert set(t) == {"detect", "compute", "write", "settle", "relock", "verify", "total"}
    assert t["total"] == pytest.approx(sum(v for k, v in t.items() if k != "total"))
    model = TimingModel()
    runs = model.exchanges(rec.program)
    assert sum(len(r) for r in runs) == len(rec.program)
    assert all(r[-1][0] // 8 == r[0][0] // 8 for r in runs)  # a vector stays in one module
    # binary: a 7-byte frame (or 7 + 2 per channel for a vector), a 7-byte read-back, and
    # "OK\n" + "+x.xxxx mA\n" back, at 10 bits a byte, plus 2 ms per exchange
    sent = sum((7 if len(r) == 1 else 7 + 2 * len(r)) + 7 for r in runs)
    back = sum(3 + len(f"{r[-1][1]:+.4f} mA\n") for r in runs)
    assert t["write"] == pytest.approx((sent + back) * 10 / 115200 * 1e3 + 2.0 * len(runs))
    # a program in mA: its phase steps are unknown here, so the worst case (a pi step)
    assert t["settle"] == pytest.approx(0.010 * np.log(100.0))
    assert t["relock"] == 5.0
    assert recovery_timing(model, 0.0, {}, 5.0, 0, detect=False)["total"] == 0.0


def test_failover_without_map_uses_phases(fabric, ring_plan):
    job, _ = ring_plan
    plan = place_job(fabric, job)
    rec = failover(fabric, job, "gpu1", plan)
    assert rec.plan.heater_unit == "rad"
    assert rec.held_unchanged
    assert rec.program
    # settle follows the program's largest phase step through the first-order response
    step = max(abs(v - plan.heater[ch]) for ch, v in rec.program.items())
    assert 0 < step <= np.pi + 1e-12
    assert rec.timing_ms["settle"] == pytest.approx(0.010 * np.log(step / (0.01 * np.pi)))


def test_heater_settle_is_a_first_order_step_response():
    model = TimingModel()
    tau, tol = 0.010, 0.01 * np.pi  # docs/physics.md: 10 us; within 1 % of pi of the final phase
    for step in (np.pi, np.pi / 2, 0.1):
        t = model.settle_ms(step)
        assert t == pytest.approx(tau * np.log(step / tol))
        assert step * np.exp(-t / tau) == pytest.approx(tol)  # exactly at the tolerance then
    assert model.settle_ms(np.pi) == pytest.approx(0.04605, abs=1e-5)  # 4.6 tau for a full pi
    assert model.settle_ms(0.5 * tol) == 0.0  # a step inside the tolerance needs no wait
    slow = TimingModel(thermal_tau_ms=0.150)  # an under-etched heater at the slow end
    assert slow.settle_ms(np.pi) == pytest.approx(15 * model.settle_ms(np.pi))
    assert TimingModel(settle_fraction=0.001).settle_ms(np.pi) == pytest.approx(tau * np.log(1000))
    small = recovery_timing(model, 0.0, {0: 0.2}, 5.0, 1, detect=False, max_phase_step_rad=0.2)
    big = recovery_timing(model, 0.0, {0: 3.0}, 5.0, 1, detect=False, max_phase_step_rad=3.0)
    assert small["settle"] < big["settle"] < recovery_timing(model, 0.0, {0: 3.0}, 5.0, 1)["settle"]


def test_failures_until_spares_run_out(fabric, hmap, ring_plan):
    job, plan = ring_plan
    r1 = failover(fabric, job, "gpu1", plan, heater_map=hmap)
    r2 = failover(fabric, r1.plan.job, "gpu5", r1.plan, heater_map=hmap)
    assert {r1.spare, r2.spare} == {"spare0", "spare1"}
    assert r2.plan.failed_accelerators == ("gpu1", "gpu5")
    assert r2.held_unchanged
    assert len(_follow_ring(r2.plan.job)) == 8
    with pytest.raises(FabricError, match=r"no spare .* replace gpu6 \(in use: spare0, spare1"):
        failover(fabric, r2.plan.job, "gpu6", r2.plan, heater_map=hmap)


def test_failover_refuses_unknown(fabric, hmap, ring_plan):
    job, plan = ring_plan
    with pytest.raises(FabricError, match="not in job"):
        failover(fabric, job, "spare0", plan, heater_map=hmap)


def test_failed_tbu_reroutes_only_its_links(fabric, hmap, ring_plan):
    _job, plan = ring_plan
    k = max(range(len(plan.links)), key=lambda i: len(plan.links[i].route.hops))
    t = plan.links[k].route.tbus[len(plan.links[k].route.tbus) // 2]
    rec = fail_tbu(fabric, plan, t, "dead", heater_map=hmap)
    users = [i for i, lk in enumerate(plan.links) if t in lk.route.tbus]
    assert list(rec.rerouted) == users
    assert all(t not in lk.route.tbus for lk in rec.plan.links)
    assert rec.held_unchanged
    assert rec.plan.failed_tbus == {t: "dead"}
    for i in range(len(plan.links)):
        if i not in users:
            assert rec.plan.links[i].route == plan.links[i].route


def test_stuck_tbu_in_needed_state_changes_nothing(fabric, hmap, ring_plan):
    _, plan = ring_plan
    lk = plan.links[0]
    t, state = next(iter(lk.route.states().items()))
    rec = fail_tbu(fabric, plan, t, state, heater_map=hmap)
    assert rec.rerouted == ()
    assert rec.program == {}
    assert rec.timing_ms["write"] == 0.0


def test_configuration_only_changes_where_reported(fabric, hmap, ring_plan):
    job, plan = ring_plan
    rec = failover(fabric, job, "gpu4", plan, heater_map=hmap)
    diff = Configuration.changed_tbus(rec.plan.configuration, plan.configuration)
    assert sorted(diff.tolist()) == sorted(rec.changed_tbus)

"""Failover that does not give up early: joint spare choice, the fewest-moves fallback, TBU swaps,
and never writing a failed TBU (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from photonics.configuration import PARK_STATE
from photonics.fabric import (
    FabricError,
    default_fabric,
    fail_tbu,
    failover,
    place_job,
    recovery_to_dict,
    ring_job,
)
from photonics.routing import conflicts

# A ring in a crossing order on the default fabric: the spare for gpu2 cannot be spliced in
# without moving one held link (found by a seeded search; docs/fabric.md).
CROSSING_RING = ["gpu3", "gpu6", "gpu4", "gpu0", "gpu2", "gpu5"]


@pytest.fixture(scope="module")
def fabric():
    return default_fabric()


@pytest.fixture(scope="module")
def hmap(fabric):
    return IdealMap(fabric.mesh.n_heaters)


@pytest.fixture(scope="module")
def plan(fabric, hmap):
    return place_job(fabric, ring_job(fabric.workers), heater_map=hmap)


def _held_identical(before, after, rec):
    for i in range(len(before.links)):
        if i in rec.rerouted:
            continue
        assert after.links[i].route == before.links[i].route
        tbus = np.array(before.links[i].route.tbus)
        ch = np.concatenate([2 * tbus, 2 * tbus + 1])
        assert np.array_equal(after.heater[ch], before.heater[ch])


def test_sequential_gpu5_then_gpu4_recovers(fabric, hmap, plan):
    """Refused before ('budget short by 1.02 dB'): the splice preferred a longer route to
    avoid sharing held TBUs; a shared-TBU route closes at ~4.49 dB and is still hitless."""
    r1 = failover(fabric, plan.job, "gpu5", plan, heater_map=hmap)
    r2 = failover(fabric, r1.plan.job, "gpu4", r1.plan, heater_map=hmap)
    assert {r1.spare, r2.spare} == {"spare0", "spare1"}
    assert all(lk.budget_ok for lk in r2.plan.links)
    assert r2.plan.worst_margin_db > 4.0
    assert r2.hitless
    assert r2.held_unchanged
    _held_identical(r1.plan, r2.plan, r2)
    assert [r["failed"] for r in r2.plan.recoveries] == ["gpu5", "gpu4"]


def test_joint_spare_choice(fabric, hmap, plan):
    rec = failover(fabric, plan.job, ["gpu5", "gpu4"], plan, heater_map=hmap)
    assert set(rec.spares) == {"gpu5", "gpu4"}
    assert sorted(rec.spares.values()) == ["spare0", "spare1"]
    assert rec.plan.failed_accelerators == ("gpu5", "gpu4")
    assert all(lk.budget_ok for lk in rec.plan.links)
    assert not conflicts(fabric.mesh, rec.plan.routes)
    assert rec.hitless
    _held_identical(plan, rec.plan, rec)
    # both assignments were tried; the winner is the best by (closes, margin to 0.01 dB, TBUs changed)
    rows = [r for r in rec.candidates if "worst_new_margin_db" in r]
    assert {r["spare"] for r in rows} == {"spare0,spare1", "spare1,spare0"}
    best = min((r for r in rows if r["all_links_close"]),
               key=lambda r: (-round(r["worst_new_margin_db"], 2), r["n_changed_tbus"]))
    assert rec.spares == best["spares"]
    assert recovery_to_dict(rec)["spares"] == rec.spares
    # a str and a one-element list mean the same
    assert failover(fabric, plan.job, ["gpu3"], plan, heater_map=hmap).spare == \
        failover(fabric, plan.job, "gpu3", plan, heater_map=hmap).spare


def test_joint_needs_enough_spares(fabric, hmap, plan):
    with pytest.raises(FabricError, match=r"no spare accelerator left to replace 3 accelerators"):
        failover(fabric, plan.job, ["gpu1", "gpu2", "gpu3"], plan, heater_map=hmap)
    with pytest.raises(FabricError, match="once"):
        failover(fabric, plan.job, ["gpu1", "gpu1"], plan, heater_map=hmap)


def test_fewest_moves_fallback(fabric, hmap):
    job = ring_job(CROSSING_RING)
    before = place_job(fabric, job, heater_map=hmap)
    with pytest.raises(FabricError, match="no spare can be spliced in for gpu2"):
        failover(fabric, job, "gpu2", before, heater_map=hmap, policy="hitless")
    rec = failover(fabric, job, "gpu2", before, heater_map=hmap)
    assert rec.policy == "fewest-moves"
    assert not rec.hitless
    assert len(rec.moved) == 1  # one held link had to move, and it is named
    i, old = rec.moved[0]
    assert old == before.links[i].route
    assert rec.plan.links[i].route != old
    assert i in rec.rerouted
    assert all(lk.budget_ok for lk in rec.plan.links)
    assert not conflicts(fabric.mesh, rec.plan.routes)
    _held_identical(before, rec.plan, rec)  # every link that did not move is untouched
    d = recovery_to_dict(rec)
    assert d["hitless"] is False
    assert d["moved_links"][0]["link"] == "->".join(before.links[i].link)
    assert d["moved_links"][0]["old_route"] == old.to_dict(fabric.mesh)
    assert d["moved_links"][0]["new_route"] == rec.plan.links[i].route.to_dict(fabric.mesh)
    with pytest.raises(FabricError, match="unknown recovery policy"):
        failover(fabric, job, "gpu2", before, heater_map=hmap, policy="best-effort")


@pytest.mark.parametrize(("tbu", "swapped"), [("tbu:0.2.0", {"gpu2"}), ("tbu:0.0.0", {"gpu0", "gpu1"})])
def test_tbu_cutting_a_lane_swaps_the_accelerator(fabric, hmap, plan, tbu, swapped):
    """Refused before ('cannot route around'): the dead TBU cuts the accelerators' lanes off."""
    rec = fail_tbu(fabric, plan, tbu, "dead", heater_map=hmap)
    assert set(rec.spares) == swapped
    assert set(rec.plan.failed_accelerators) == swapped
    assert not swapped & set(rec.plan.job.accelerators)
    t = fabric.mesh.tbu_index(tbu)
    assert all(t not in lk.route.tbus for lk in rec.plan.links)
    assert all(lk.budget_ok for lk in rec.plan.links)
    assert rec.hitless


@pytest.fixture(scope="module")
def every_tbu_failure(fabric, hmap, plan):
    used = sorted({t for r in plan.routes for t in r.tbus})
    out = {}
    for t in used:
        for how in ("dead", "bar", "cross"):
            out[(t, how)] = fail_tbu(fabric, plan, t, how, heater_map=hmap)
    return out


def test_every_single_tbu_failure_of_the_ring_recovers(plan, every_tbu_failure):
    assert len(every_tbu_failure) == 96  # 32 TBUs on the ring's routes, three ways to fail
    for (t, how), rec in every_tbu_failure.items():
        assert all(lk.budget_ok for lk in rec.plan.links), (t, how)
        assert rec.plan.failed_tbus == {t: how}
        if how == "dead":
            assert all(t not in lk.route.tbus for lk in rec.plan.links)


def test_a_failed_tbu_is_never_written(fabric, hmap, plan, every_tbu_failure):
    """Before: 28 of the 96 recoveries wrote the failed TBU's own heaters."""
    for (t, _how), rec in every_tbu_failure.items():
        assert not {2 * t, 2 * t + 1} & set(rec.program), fabric.mesh.tbu_names[t]
        assert np.array_equal(rec.plan.heater[[2 * t, 2 * t + 1]], plan.heater[[2 * t, 2 * t + 1]])
    # nor when a TBU no route uses gets stuck, nor when parking freed TBUs
    idle = next(t for t in range(fabric.mesh.n_tbus) if all(t not in r.tbus for r in plan.routes))
    stuck = "bar" if plan.configuration.cross_fraction[idle] == 1.0 else "cross"
    rec = fail_tbu(fabric, plan, idle, stuck, heater_map=hmap)
    assert rec.program == {}
    # a TBU stuck in the state its route needs, then that link's transmitter fails and the
    # freed TBUs are parked: the stuck one is left alone (it cannot be parked)
    parked = 1.0 if PARK_STATE == "cross" else 0.0
    k, t = next((k, t) for k, lk in enumerate(plan.links) for t in lk.route.tbus
                if plan.configuration.cross_fraction[t] != parked)
    state = plan.links[k].route.states()[t]
    stuck = fail_tbu(fabric, plan, t, state, heater_map=hmap)
    assert stuck.program == {}
    park = failover(fabric, stuck.plan.job, plan.links[k].link[0], stuck.plan, heater_map=hmap,
                    park_freed=True)
    assert park.program
    assert not {2 * t, 2 * t + 1} & set(park.program)

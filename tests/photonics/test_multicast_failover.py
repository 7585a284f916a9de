"""Failover of a multicast tree: prune a failed receiver, or splice its branch to a spare."""

from __future__ import annotations

import numpy as np
import pytest

from photonics.errors import RoutingError
from photonics.fabric import default_fabric
from photonics.fabric.model import FabricError
from photonics.fabric.multicast import plan_multicast
from photonics.fabric.multicast_failover import BRANCH_TOL_DB, fail_receiver


@pytest.fixture(scope="module")
def fab():
    return default_fabric()


@pytest.fixture(scope="module")
def plan(fab):
    p = plan_multicast(fab, [("gpu0", ["gpu1", "gpu2"]), ("gpu4", ["gpu5", "gpu6"])])
    assert p.ok
    return p


def _power(plan):
    return {(b.src, b.dst): b.transmission_db for row in plan.branches for b in row}


def _held_tbus(plan, group, failed_dst):
    """TBUs that any branch other than the failed receiver's passes."""
    k = plan.groups[group][1].index(failed_dst)
    out = {t for j, tr in enumerate(plan.trees) if j != group for t in tr.tbus}
    return out | {h.tbu for j, r in enumerate(plan.trees[group].branches) if j != k for h in r.hops}


def test_prune_keeps_other_branches_power_and_touches_none_of_their_tbus(fab, plan):
    before = plan.configuration.cross_fraction.copy()
    r = fail_receiver(fab, plan, "gpu2")
    assert r.changed_tbus == ()
    assert np.array_equal(r.plan.configuration.cross_fraction, before)
    assert r.plan.groups[0] == ("gpu0", ("gpu1",))
    old, new = _power(plan), _power(r.plan)
    assert set(new) == {("gpu0", "gpu1"), ("gpu4", "gpu5"), ("gpu4", "gpu6")}
    assert all(abs(new[b] - old[b]) <= BRANCH_TOL_DB for b in new)
    assert r.plan.ok
    assert np.isfinite(r.plan.checks[0].acr_db)  # the dead port is no victim
    assert r.plan.trees[0].splits == plan.trees[0].splits  # the split keeps its ratio


def test_splice_to_a_spare_delivers_with_margin_and_leaves_the_others_tbus(fab, plan):
    r = fail_receiver(fab, plan, "gpu6", "spare0")
    held = _held_tbus(plan, 1, "gpu6")
    assert r.changed_tbus
    assert not held & set(r.changed_tbus)
    idx = sorted(held)
    assert np.array_equal(r.plan.configuration.cross_fraction[idx], plan.configuration.cross_fraction[idx])
    assert r.plan.groups[1] == ("gpu4", ("gpu5", "spare0"))
    spare = r.plan.branches[1][1]
    assert spare.dst == "spare0"
    assert spare.budget_ok
    assert spare.margin_db >= 3.0
    assert r.plan.trees[1].splits == plan.trees[1].splits
    old, new = _power(plan), _power(r.plan)
    assert all(abs(new[b] - old[b]) <= BRANCH_TOL_DB for b in new if b in old)
    assert r.shift_db <= BRANCH_TOL_DB
    # the spare's branch is the old one down to the split, then a new path over free TBUs
    old_branch, new_branch = plan.trees[1].branches[1], r.plan.trees[1].branches[1]
    assert new_branch.hops[0] == old_branch.hops[0]
    assert not {h.tbu for h in new_branch.hops} & set(plan.trees[0].tbus)


def test_no_free_path_is_refused_in_one_line_and_nothing_changes(fab, plan):
    before = plan.configuration.cross_fraction.copy()
    # gpu5's branch leaves its split straight into its port: nothing below the split to re-route
    with pytest.raises(RoutingError, match="no free path") as e:
        fail_receiver(fab, plan, "gpu5", "spare0")
    assert "\n" not in str(e.value)
    # every TBU outside the trees failed after planning: the splice has nowhere to go
    used = {t for tr in plan.trees for t in tr.tbus}
    dead = {t: "dead" for t in range(fab.mesh.n_tbus) if t not in used}
    with pytest.raises(RoutingError, match="no free path"):
        fail_receiver(fab, plan, "gpu6", "spare0", failed=dead)
    assert np.array_equal(plan.configuration.cross_fraction, before)
    assert plan.groups[1] == ("gpu4", ("gpu5", "gpu6"))


def test_a_spare_that_cannot_close_or_is_busy_is_refused_naming_it(fab, plan):
    with pytest.raises(FabricError, match="branch gpu4->spare1 does not close"):
        fail_receiver(fab, plan, "gpu6", "spare1")
    with pytest.raises(FabricError, match="already in a multicast group"):
        fail_receiver(fab, plan, "gpu6", "gpu1")
    with pytest.raises(FabricError, match="receiver of no group"):
        fail_receiver(fab, plan, "gpu7")


def test_a_held_branch_moved_beyond_the_tolerance_is_refused_naming_it(fab, monkeypatch):
    """gpu0 -> {gpu2, gpu3}: splicing gpu3 to gpu7 moves gpu2 by ~1e-4 dB through crosstalk."""
    import photonics.fabric.multicast_failover as mf

    plan = plan_multicast(fab, [("gpu0", ["gpu2", "gpu3"])])
    r = fail_receiver(fab, plan, "gpu3", "gpu7")
    assert 0 < r.shift_db <= BRANCH_TOL_DB  # the solve sees the new path's leak, within tolerance
    monkeypatch.setattr(mf, "BRANCH_TOL_DB", r.shift_db / 2)
    with pytest.raises(FabricError, match=r"refused: branch gpu0->gpu2 moved .* dB \(tolerance"):
        fail_receiver(fab, plan, "gpu3", "gpu7")

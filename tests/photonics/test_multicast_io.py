"""Multicast plan files (``lumion.multicast-plan`` v1): what they keep, and what loading refuses."""

from __future__ import annotations

import copy
import json

import pytest

from photonics.fabric import default_fabric
from photonics.fabric.model import FabricError
from photonics.fabric.multicast import plan_multicast
from photonics.fabric.multicast_io import (
    RunningMulticast,
    load_multicast,
    multicast_from_dict,
    multicast_to_dict,
    save_multicast,
)


@pytest.fixture(scope="module")
def fab():
    return default_fabric()


@pytest.fixture(scope="module")
def doc(fab):
    plan = plan_multicast(fab, [("gpu0", ["gpu1", "gpu2"]), ("gpu4", ["gpu5", "gpu6"])])
    return multicast_to_dict(RunningMulticast(plan, frozenset({fab.accelerator("gpu3").rx[0]})), fab)


def test_a_plan_comes_back_with_its_trees_dark_ports_and_figures(fab, doc, tmp_path):
    save_multicast(multicast_from_dict(doc, fab), fab, tmp_path / "mc.json")
    again = load_multicast(tmp_path / "mc.json", fab)
    assert again.plan.groups == (("gpu0", ("gpu1", "gpu2")), ("gpu4", ("gpu5", "gpu6")))
    assert again.dark == frozenset({fab.accelerator("gpu3").rx[0]})
    figures = [b["transmission_db"] for g in doc["groups"] for b in g["branches"]]
    solved = [b.transmission_db for row in again.plan.branches for b in row]
    assert solved == pytest.approx(figures, abs=1e-12)
    assert json.loads((tmp_path / "mc.json").read_text()) == json.loads(json.dumps(doc))


def _refused(fab, doc, match):
    with pytest.raises(FabricError, match=match) as e:
        multicast_from_dict(doc, fab, "mc.json")
    assert "\n" not in str(e.value)


def test_a_configuration_that_disagrees_with_a_tree_is_refused(fab, doc):
    bad = copy.deepcopy(doc)
    split = bad["groups"][0]["tree"]["splits"][0]["tbu"]
    bad["configuration"]["tbus"][split] = "cross"
    _refused(fab, bad, f"sets {split} to cross fraction 1, but group 0's tree needs")


def test_a_tree_through_a_dead_tbu_or_sharing_one_is_refused(fab, doc):
    bad = copy.deepcopy(doc)
    tbu = bad["groups"][1]["tree"]["branches"][0]["tbus"][0]["tbu"]
    bad["failed_tbus"] = {tbu: "dead"}
    _refused(fab, bad, f"group 1's tree routes through {tbu}, which failed")
    bad = copy.deepcopy(doc)
    hops = [g["tree"]["branches"][0]["tbus"] for g in bad["groups"]]
    hops[1][0] = dict(hops[0][0])
    _refused(fab, bad, "both use")


def test_trees_on_other_lanes_or_unknown_accelerators_are_refused(fab, doc):
    bad = copy.deepcopy(doc)
    bad["groups"][0]["dsts"] = ["gpu2", "gpu1"]  # gpu1's branch now lands at gpu2's port
    _refused(fab, bad, r"branch gpu0->gpu2 goes .* but gpu2 receives on")
    bad = copy.deepcopy(doc)
    bad["groups"][0]["dsts"] = ["gpu1", "gpu9"]
    _refused(fab, bad, "names gpu9, not accelerators of fabric")
    _refused(fab, {**doc, "version": 2}, "unsupported multicast plan version 2")
    _refused(fab, {**doc, "mesh_fingerprint": "0" * 16}, "made for another mesh")
    _refused(fab, {**doc, "schema": "lumion.plan"}, "not a LUMION multicast plan")

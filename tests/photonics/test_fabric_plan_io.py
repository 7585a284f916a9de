"""Plans as files (``lumion.plan`` v1): round trip, refusals, and acting on a reloaded plan."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from photonics.fabric import (
    FabricError,
    default_fabric,
    failover,
    load_plan,
    place_job,
    plan_from_dict,
    plan_to_dict,
    recovery_to_dict,
    ring_job,
    save_plan,
)
from photonics.fabric.model import Accelerator, make_fabric
from photonics.topology import hexagonal


@pytest.fixture(scope="module")
def fabric():
    return default_fabric()


@pytest.fixture(scope="module")
def hmap(fabric):
    return IdealMap(fabric.mesh.n_heaters)


@pytest.fixture(scope="module")
def plan(fabric, hmap):
    return place_job(fabric, ring_job(fabric.workers), heater_map=hmap)


def test_round_trip_is_exact(fabric, plan, tmp_path):
    path = tmp_path / "plan.json"
    save_plan(plan, fabric, path)
    data = json.loads(path.read_text())
    assert (data["schema"], data["version"]) == ("lumion.plan", 1)
    assert data["heater_unit"] == "mA"
    assert len(data["heater"]) == fabric.mesh.n_heaters
    assert data["links"][0]["route"]["tbus"]
    assert data["configuration"]["schema"] == "lumion.configuration"
    back = load_plan(path, fabric)
    assert back.job == plan.job
    assert back.routes == plan.routes
    assert np.array_equal(back.heater, plan.heater)  # bit-identical: JSON floats round-trip
    assert np.array_equal(back.configuration.cross_fraction, plan.configuration.cross_fraction)
    assert [lk.margin_db for lk in back.links] == [lk.margin_db for lk in plan.links]
    assert plan_to_dict(back, fabric) == data


def test_reloaded_plan_fails_over_like_the_original(fabric, hmap, plan):
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan, fabric))), fabric)
    a = failover(fabric, plan.job, "gpu2", plan, heater_map=hmap)
    b = failover(fabric, back.job, "gpu2", back, heater_map=hmap)
    assert (a.spare, a.program, a.rerouted) == (b.spare, b.program, b.rerouted)
    assert b.held_unchanged
    # the recovery is kept in the new plan's history, with the CLI's keys
    assert [r["failed"] for r in b.plan.recoveries] == ["gpu2"]
    saved = plan_from_dict(json.loads(json.dumps(plan_to_dict(b.plan, fabric))), fabric)
    assert saved.recoveries[0]["spare"] == b.spare
    assert saved.failed_accelerators == ("gpu2",)
    keys = set(recovery_to_dict(b))
    assert {"failed", "spare", "rerouted_links", "changed_tbus", "changed_heaters", "heater_unit",
            "unaffected_routes_unchanged", "held_heater_drift", "links", "timing_ms", "candidates"} <= keys


def _bad(data, change):
    d = copy.deepcopy(data)
    change(d)
    return d


def _swap_routes(d):
    d["links"][0]["route"], d["links"][1]["route"] = d["links"][1]["route"], d["links"][0]["route"]


def _collide(d):
    # link 1 rerouted along link 0's TBUs: same TBU ports used twice
    d["links"][1]["route"]["tbus"] = d["links"][0]["route"]["tbus"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(schema="lumion.fabric"), "not a LUMION plan"),
    (lambda d: d.update(version=2), "unsupported plan version"),
    (lambda d: d.update(mesh_fingerprint="hex:9x9/abc"), "another mesh"),
    (lambda d: d["job"]["accelerators"].append("gpu99"), "gpu99, not accelerators of fabric"),
    (_swap_routes, "its route goes"),
    (_collide, "the routes collide"),
    (lambda d: d["links"][0]["route"]["tbus"][0].update(tbu="tbu:99.9.9"), "malformed route"),
    (lambda d: d.update(heater=d["heater"][:-1]), "must list 142 values"),
    (lambda d: d.update(heater_unit="V"), "heater_unit"),
    (lambda d: d["failed_tbus"].update({"tbu:0.0.0": "melted"}), "give dead, bar, cross"),
    (lambda d: d["links"][0].update(margin_db="big"), "margin_db must be a number"),
])
def test_bad_plans_are_refused_in_one_line(fabric, plan, change, message):
    data = plan_to_dict(plan, fabric)
    with pytest.raises(FabricError, match=message) as info:
        plan_from_dict(_bad(data, change), fabric, "p.json")
    assert "\n" not in str(info.value)


def test_collision_is_named(fabric, plan):
    """Two links sharing one TBU port are refused as a collision (not only by their ends)."""
    data = plan_to_dict(plan, fabric)
    # make link 1's route a copy of link 0's with link 1's own ends: the middle collides
    d = copy.deepcopy(data)
    r0, r1 = d["links"][0]["route"], d["links"][1]["route"]
    r1["tbus"] = [r1["tbus"][0], *r0["tbus"][1:-1], r1["tbus"][-1]]
    with pytest.raises(FabricError, match="the routes collide"):
        plan_from_dict(d, fabric)


def test_plan_for_another_mesh_is_refused(fabric, plan):
    mesh = hexagonal(4, 6)
    other = make_fabric(mesh, [Accelerator("gpu0", (1,), (0,)), Accelerator("gpu1", (5,), (4,))],
                        mesh_spec="hex:4x6")
    with pytest.raises(FabricError, match="another mesh"):
        plan_from_dict(plan_to_dict(plan, fabric), other)


def test_load_plan_file_errors(fabric, tmp_path):
    with pytest.raises(FabricError, match="not found"):
        load_plan(tmp_path / "none.json", fabric)
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(FabricError, match="not valid JSON"):
        load_plan(tmp_path / "x.json", fabric)

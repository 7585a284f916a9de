"""The fabric honours the TBUs a calibration map records as failed (issue 26, item 5).

``lumion route --map`` routed around them; placement, failover and phases did not: they
routed light through a TBU the map records as dead. A map offers them through
``failed_tbus()`` (``calibration.map.CalibrationMap``: name -> dead/bar/cross, unverified as
dead); the fabric takes them with ``heater_map=`` as it takes ``failed_tbus=``.
"""

from __future__ import annotations

import pytest

from calibration.heater_map import IdealMap
from photonics.fabric import FabricError, default_fabric, failover, place_job, ring_job


class RecordingMap(IdealMap):
    """A heater map that records failed TBUs as a calibration map does (``failed_tbus()``)."""

    def __init__(self, n_heaters: int, failed: dict[str, str]) -> None:
        super().__init__(n_heaters)
        self._failed = dict(failed)

    def failed_tbus(self) -> dict[str, str]:
        return dict(self._failed)


def _tbus(plan) -> set[int]:
    return {t for r in plan.links for t in r.route.tbus}


def test_placement_avoids_a_tbu_the_map_records_as_dead():
    fabric = default_fabric()
    job = ring_job(fabric.workers)
    chosen = place_job(fabric, job, heater_map=IdealMap(fabric.mesh.n_heaters))
    route = max((r.route for r in chosen.links), key=lambda r: len(r.tbus))
    tbu = route.tbus[len(route.tbus) // 2]  # an interior TBU: light can go around it
    name = fabric.mesh.tbu_names[tbu]
    plan = place_job(fabric, job, heater_map=RecordingMap(fabric.mesh.n_heaters, {name: "dead"}))
    assert tbu not in _tbus(plan)
    assert plan.failed_tbus.get(tbu) == "dead"


def test_failover_avoids_a_tbu_the_map_records_as_dead():
    fabric = default_fabric()
    job = ring_job(fabric.workers)
    ideal = IdealMap(fabric.mesh.n_heaters)
    plan = place_job(fabric, job, heater_map=ideal)
    victim = job.accelerators[0]
    before = failover(fabric, job, victim, plan, heater_map=ideal)
    held = {t for i, r in enumerate(plan.links) if i not in before.rerouted for t in r.route.tbus}
    route = max((before.plan.links[i].route.tbus for i in before.rerouted), key=len)
    # TBUs of the spare's new route that a detour can avoid (held routes keep theirs)
    for tbu in [t for t in route[1:-1] if t not in held]:
        hmap = RecordingMap(fabric.mesh.n_heaters, {fabric.mesh.tbu_names[tbu]: "dead"})
        try:
            rec = failover(fabric, job, victim, plan, heater_map=hmap)
        except FabricError:
            continue  # this TBU cuts the spare off: the refusal is right; try the next one
        assert all(tbu not in rec.plan.links[i].route.tbus for i in rec.rerouted)
        assert rec.plan.failed_tbus.get(tbu) == "dead"
        return
    raise AssertionError("no TBU of the new route can be routed around: pick another fabric")


def test_phases_avoid_a_tbu_the_map_records_as_dead():
    from pathlib import Path

    from photonics.fabric import load_job_toml, plan_phases

    fabric = default_fabric()
    job = load_job_toml(Path(__file__).resolve().parents[2] / "examples" / "tp4-dp2.toml")
    ideal = IdealMap(fabric.mesh.n_heaters)
    before = plan_phases(fabric, job, heater_map=ideal)
    used = [t for step in before for r in step.configuration.routes for t in r.tbus]
    for tbu in sorted(set(used), key=used.index):
        hmap = RecordingMap(fabric.mesh.n_heaters, {fabric.mesh.tbu_names[tbu]: "dead"})
        try:
            steps = plan_phases(fabric, job, heater_map=hmap)
        except FabricError:
            continue  # this TBU cuts a phase's link off: the refusal is right; try the next
        assert all(tbu not in r.tbus for step in steps for r in step.configuration.routes)
        return
    raise AssertionError("no TBU the phases use can be routed around")


@pytest.mark.slow  # a calibration and lumion phases
def test_lumion_phases_map_avoids_its_dead_tbu(tmp_path, capsys):
    import json
    from dataclasses import replace
    from pathlib import Path

    from instruments.sim.chip import Chip
    from lab_scripts.cli import main
    from photonics.fabric import load_job_toml, plan_phases
    from tests.controlplane.rack import oracle_map

    fabric = default_fabric()
    examples = Path(__file__).resolve().parents[2] / "examples"
    job_file = examples / "tp4-dp2.toml"
    before = plan_phases(fabric, load_job_toml(job_file), heater_map=IdealMap(fabric.mesh.n_heaters))
    used = {t for step in before for r in step.configuration.routes for t in r.tbus}
    cmap = oracle_map(Chip(fabric.mesh, 0))
    for tbu in sorted(used):
        replace(cmap, failed={tbu: "dead"}).save(tmp_path / "map.json")
        if main(["phases", str(job_file), "--map", str(tmp_path / "map.json"), "--json"]) != 0:
            capsys.readouterr()
            continue  # this TBU cuts a phase's link off: the refusal is right; try the next
        out = json.loads(capsys.readouterr().out)
        name = fabric.mesh.tbu_names[tbu]
        routed = [t for c in out["configurations"] for r in c["configuration"]["routes"] for t in r["tbus"]]
        assert routed
        assert name not in routed
        assert tbu not in routed
        return
    raise AssertionError("no TBU the phases use can be routed around")

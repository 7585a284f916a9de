"""Heater states through the service (issue 31): ``POST /api/v1/states`` takes what ``lumion
synthesize --out`` writes, refuses what ``lumion program`` refuses (and what would break a
running job), sets the state on its own TBUs, checks it by light against its prediction and
records it; ``DELETE`` clears it. Before this, the service programmed point-to-point jobs only
(every request below answered 404).

One in-process rack per module (an ideal simulated smartlight chip, so every disagreement with
light is the state's, and its perfect phase-calibrated map: what a perfect
``lumion calibrate --common-phase`` gives), served through the real application (auth, errors).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from controlplane.errors import ServiceError
from instruments.state_check import STATE_TOL
from lab_scripts.cli import main
from photonics.tolerances import HELD_TOL_DB
from tests.calibration.test_common_phase import truth_map
from tests.controlplane.rack import Rack, ServedRack

SEED = 4371  # no other test uses it (tests/ grep 4371)
TOKEN = "states-t0ken"
FILTER = "1550:0.178"  # a Mach-Zehnder passband the smartlight mesh's arm lengths allow


def synthesize(folder: Path, *args: str) -> dict:
    """What `lumion synthesize ... --out` writes (stdout dropped)."""
    out = folder / "state.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["synthesize", *args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


class Env(ServedRack):
    """The module's rack, its application's client, the filter state synthesised through its map."""

    def __init__(self, folder: Path) -> None:
        rack = Rack(folder / "cp.db", seed=SEED, model="ideal",
                    heater_map=lambda chip: truth_map(chip, common=True))
        rack.bench.sim = rack.sim  # as `lumion serve --bench sim` opens it: sim endpoints mount
        rack.cp.heater_map.save(folder / "map.json")  # what `lumion synthesize --map` reads
        self.doc = synthesize(folder, "--mesh", "smartlight", "--map", str(folder / "map.json"),
                              "--mz-filter", FILTER)
        super().__init__(folder, rack, TOKEN)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("states"))
    yield e
    e.close()


def used(env) -> list[int]:
    """The state's TBUs (indices)."""
    mesh = env.rack.fabric.mesh
    return [mesh.tbu_index(t) for t in env.doc["prediction"]["tbus"]]


def channels(tbus: list[int]) -> list[int]:
    return [c for t in tbus for c in (2 * t, 2 * t + 1)]


def error(resp, status: int, kind: str) -> dict:
    """The one JSON error object of a refusal."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["kind"] == kind, body
    assert body["error"], body
    assert body["hint"], body
    return body


def events(env, kind: str) -> list[dict]:
    return [e for e in env.rack.cp.events(0, 5000) if e["kind"] == kind]


def link_light_db(env) -> list[float]:
    """Independent of the service's answer: every running link read now, measured minus planned (dB)."""
    return [r.measured_dbm - r.planned_dbm for r in env.rack.cp.light.read(env.rack.cp.state.plan)]


def test_a_state_is_set_beside_a_job_verified_by_light_and_cleared(env):
    c, cp = env.client, env.rack.cp
    job = c.post("/api/v1/jobs", json={"pattern": "links", "links": [["gpu4", "gpu5"]]}).json()
    before = cp.state.currents.copy()

    resp = c.post("/api/v1/states", json=env.doc)

    assert resp.status_code == 201, resp.text
    out = resp.json()
    v = out["verification"]
    assert (out["status"], v["status"], v["check"], v["prediction"]) == ("ok", "ok", "state", "synthesis")
    assert out["tbus"] == env.doc["prediction"]["tbus"]
    assert v["not_verifiable"] == []
    assert [r["wavelength_nm"] for r in v["inputs"]] == env.doc["prediction"]["wavelengths_nm"]
    assert all(abs(r["worst"]["difference"]) <= STATE_TOL for r in v["inputs"])
    # only the state's own heaters moved: the job's (and every parked TBU's) are as they were
    moved = np.flatnonzero(np.abs(cp.state.currents - before) > 1e-3)
    assert set(moved) <= set(channels(used(env)))
    assert len(moved) == out["n_changed_heaters"]
    assert out["links"]["hitless_by_light"] is True
    assert all(abs(d) <= HELD_TOL_DB for d in link_light_db(env))
    # recorded: the list, the status, the event stream
    listed = c.get("/api/v1/states").json()["states"]
    assert [s["id"] for s in listed] == [out["id"]]
    assert listed[0]["verification"] == v
    assert c.get("/api/v1/status").json()["heater_states"] == [{"id": out["id"], "tbus": out["tbus"],
                                                               "status": "ok"}]
    ev = events(env, "state-applied")[-1]
    assert (ev["state"], ev["status"], ev["intent"]) == (out["id"], "ok", out["intent"])

    cleared = c.delete(f"/api/v1/states/{out['id']}")
    assert cleared.status_code == 200
    assert cleared.json()["state"] == "cleared"
    error(c.get(f"/api/v1/states/{out['id']}"), 404, "not-found")
    assert np.allclose(cp.state.currents, before, atol=1e-3)  # parked again, as before the state
    assert events(env, "state-cleared")[-1]["state"] == out["id"]
    c.delete(f"/api/v1/jobs/{job['id']}")


def test_a_state_on_a_running_jobs_tbus_is_refused_naming_the_job_and_the_job_keeps_its_light(env):
    c, cp = env.client, env.rack.cp
    ring = c.post("/api/v1/jobs", json={"accelerators": [f"gpu{k}" for k in range(8)]}).json()
    before, light_before = cp.state.currents.copy(), link_light_db(env)
    crossed = sorted({cp.mesh.tbu_names[t] for lk in cp.state.plan.links for t in lk.route.tbus}
                     & set(env.doc["prediction"]["tbus"]))
    assert crossed  # the ring crosses the filter's TBUs (else this test would test nothing)

    body = error(c.post("/api/v1/states", json=env.doc), 409, "impossible")

    assert f"job {ring['id']} holds " in body["error"]
    assert all(name in body["error"] for name in crossed)
    assert "nothing was written" in body["error"]
    assert np.array_equal(cp.state.currents, before)
    assert cp.controller.resync() == pytest.approx(before, abs=1e-3)
    light_after = link_light_db(env)
    assert all(abs(d) <= HELD_TOL_DB for d in light_after)  # every ring link carries its light
    assert np.allclose(light_after, light_before, atol=HELD_TOL_DB)
    assert c.get("/api/v1/states").json()["states"] == []
    c.delete(f"/api/v1/jobs/{ring['id']}")


def test_a_state_light_disagrees_with_is_refused_and_the_chip_restored(env):
    c, cp = env.client, env.rack.cp
    victim = env.doc["prediction"]["tbus"][0]
    before = cp.state.currents.copy()
    assert c.post(f"/api/v1/sim/tbus/{victim}/shift", json={"rad": math.pi}).status_code == 200
    try:
        body = error(c.post("/api/v1/states", json=env.doc), 502, "mismatch")
    finally:
        c.post(f"/api/v1/sim/tbus/{victim}/shift", json={"rad": -math.pi})

    assert (body["status"], body["restored"], body["verification"]["status"]) == ("mismatch", True, "off")
    off = [r for r in body["verification"]["inputs"] if r["status"] == "off"]
    assert off
    assert all(f"{r['worst']['port']} measured" in body["error"] for r in off)
    assert "wrote the previous currents back" in body["error"]
    # nothing left half-applied: the chip holds (and the service records) what it held before
    assert cp.controller.resync() == pytest.approx(before, abs=1e-3)
    assert np.array_equal(cp.state.currents, before)
    assert c.get("/api/v1/states").json()["states"] == []
    assert events(env, "state-refused")[-1]["verification"]["status"] == "off"
    assert cp.store.open_intents(cp.chip_id) == []


def test_a_state_survives_a_restart_of_the_service(env):
    rack = env.rack
    sid = env.client.post("/api/v1/states", json=env.doc).json()["id"]
    currents = rack.cp.state.currents.copy()
    env.restart()

    again = rack.cp.heater_state(sid)
    assert again["status"] == "ok"
    assert again["tbus"] == env.doc["prediction"]["tbus"]
    assert np.allclose(rack.cp.state.currents, currents, atol=1e-3)
    # its TBUs stay held after the restart: the ring that crossed them no longer fits
    with pytest.raises(ServiceError, match="does not fit around the running jobs") as refused:
        rack.cp.place_job(accelerators=[f"gpu{k}" for k in range(8)])
    assert refused.value.kind == "impossible"
    assert np.allclose(rack.cp.state.currents, currents, atol=1e-3)
    assert env.client.delete(f"/api/v1/states/{sid}").status_code == 200



def test_a_state_light_cannot_fully_confirm_is_applied_as_unverified_naming_what(env, monkeypatch):
    """A bench with no meter head at the filter's passband port: light confirms the rest, the
    state is applied and said ``unverified`` (never ``ok``), naming the port it could not read."""
    c, bench = env.client, env.rack.bench
    passband = env.rack.fabric.mesh.port_index(env.doc["prediction"]["outputs"][0])
    heads = {p: h for p, h in bench.meter_channels.items() if p != passband}
    monkeypatch.setattr(bench, "meter_channels", heads)

    out = c.post("/api/v1/states", json=env.doc).json()

    assert out["status"] == "unverified"
    blind = [r for r in out["verification"]["inputs"] if r["status"] == "unverified"]
    assert blind
    assert all(f"no power meter head at {env.doc['prediction']['outputs'][0]}" in r["reason"]
                         for r in blind)
    assert c.get(f"/api/v1/states/{out['id']}").json()["status"] == "unverified"
    assert c.delete(f"/api/v1/states/{out['id']}").status_code == 200


def test_a_state_write_that_would_break_a_running_link_is_taken_back(env, monkeypatch):
    """The last guard of a running job: its links are read before and after the state's write.
    A write reaching one of its heaters (here forced: the service writes the state's TBUs only)
    is refused 502 with the chip restored, and the link carries its light again."""
    import controlplane.states as states_module

    c, cp = env.client, env.rack.cp
    job = c.post("/api/v1/jobs", json={"pattern": "links", "links": [["gpu4", "gpu5"]]}).json()
    route = cp.state.plan.links[0].route.tbus
    before, light_before = cp.state.currents.copy(), link_light_db(env)
    real = states_module.state_program

    def reaching_the_job(program, *args):
        writes = real(program, *args)
        ch = 2 * int(route[len(route) // 2])
        return {**writes, ch: float(before[ch]) + 3.0}  # ~a pi step on a mid-route TBU's heater

    monkeypatch.setattr(states_module, "state_program", reaching_the_job)
    body = error(c.post("/api/v1/states", json=env.doc), 502, "mismatch")

    assert body["verification"]["status"] == "ok"  # the state itself was fine: the link was not
    assert "moved running links" in body["error"]
    assert "gpu4->gpu5" in body["error"]
    assert np.allclose(cp.controller.resync(), before, atol=1e-3)
    assert np.allclose(link_light_db(env), light_before, atol=HELD_TOL_DB)
    assert c.get("/api/v1/states").json()["states"] == []
    c.delete(f"/api/v1/jobs/{job['id']}")

class Crash(BaseException):
    """The service dying between the write and the light check (as SIGKILL would, in-process)."""


def test_a_crash_before_the_light_check_is_written_back_on_restart_never_rolled_forward(env, monkeypatch):
    cp = env.rack.cp
    before = cp.state.currents.copy()

    def die(*_args):
        raise Crash

    monkeypatch.setattr("controlplane.states.state_check", die)
    with pytest.raises(Crash):
        cp.apply_state(env.doc)
    monkeypatch.undo()
    (it,) = cp.store.open_intents(cp.chip_id)
    assert it["kind"] == "state"
    assert np.allclose(cp.controller.resync(), it["target"], atol=1e-3)

    env.restart()  # the chip holds the target; light never agreed with it: written back

    assert env.rack.cp.store.intent(it["id"])["status"] == "reverted"
    assert np.allclose(env.rack.cp.controller.resync(), before, atol=1e-3)
    assert env.client.get("/api/v1/states").json()["states"] == []


def test_what_lumion_program_refuses_the_service_refuses_with_one_json_error_each(env):
    c, cp = env.client, env.rack.cp
    error(c.post("/api/v1/states", json={"schema": "lumion.configuration"}), 422, "input")
    other = synthesize(env.folder, "--mesh", "square:3x3", "--unitary", "random:3:0")
    assert "synthesized for mesh" in error(c.post("/api/v1/states", json=other), 422, "input")["error"]
    kept = cp.heater_map
    for name, hmap in (("power-only", truth_map(env.rack.sim.chip)), ("ideal", None)):
        cp.heater_map = hmap
        try:
            said = error(c.post("/api/v1/states", json=env.doc), 409, "impossible")["error"]
        finally:
            cp.heater_map = kept
        assert name in said
        assert "--common-phase" in said
    # a TBU reported failed (last: the failure stays recorded for this module's rack)
    dead = env.doc["prediction"]["tbus"][2]
    assert c.post("/api/v1/failures", json={"tbu": dead, "state": "dead"}).status_code == 200
    said = error(c.post("/api/v1/states", json=env.doc), 409, "impossible")["error"]
    assert f"uses {dead}, which is failed (dead" in said
    assert "lumion synthesize --map" in said
    assert c.get("/api/v1/states").json()["states"] == []

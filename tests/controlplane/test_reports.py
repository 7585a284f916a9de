"""Failure reports a client relies on: bad times refused before anything is written, retries
answered with the committed recovery, refusals logged, repair idempotent (in-process,
simulated bench over its real transports)."""

from __future__ import annotations

import math
import time

import pytest

from controlplane import crash
from controlplane.errors import ServiceError
from controlplane.service import ControlPlane
from controlplane.store import Store
from photonics.fabric import default_fabric
from tests.controlplane.test_reconcile import Died


def _intents(cp: ControlPlane) -> int:
    return int(cp.store.query("SELECT COUNT(*) FROM intents")[0][0])


@pytest.mark.parametrize(
    "detected_s",
    [math.nan, math.inf, -math.inf, float("1e309"), time.time() * 1e3, 0.0, time.time() + 3600],
    ids=["nan", "inf", "-inf", "1e309", "ms-not-s", "epoch-zero", "an-hour-ahead"],
)
def test_a_bad_detection_time_is_refused_before_anything_is_written(cp, bench, detected_s):
    job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    events, intents, chip = len(cp.events(0, 5000)), _intents(cp), bench.sim.heater.currents().copy()
    with pytest.raises(ServiceError) as err:
        cp.report_failure(None, accelerator="gpu1", detected_s=detected_s)
    assert err.value.kind == "input"
    assert "detected_s" in str(err.value)
    assert len(cp.events(0, 5000)) == events  # not even the failure-reported event
    assert _intents(cp) == intents
    assert (bench.sim.heater.currents() == chip).all()
    assert cp.status()["failed_accelerators"] == []
    assert cp.job(job["id"])["accelerators"] == ["gpu0", "gpu1", "gpu2", "gpu3"]


def test_a_plausible_detection_time_becomes_the_detect_stage(cp):
    cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    seen = time.time() - 0.25
    rec = cp.report_failure(None, accelerator="gpu1", detected_s=seen)
    detect = next(s for s in rec["stages"] if s["stage"] == "detect")
    assert detect["start_s"] == seen
    assert rec["measured_ms"]["detect"] >= 250.0


def test_a_repeated_report_is_answered_with_the_committed_recovery(cp):
    job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    first = cp.report_failure(job["id"], accelerator="gpu2")
    intents = _intents(cp)
    repeats = [cp.report_failure(job["id"], accelerator="gpu2"), cp.report_failure(None, accelerator="gpu2")]
    for again in repeats:
        assert again["replayed"] is True
        assert again["intent"] == first["intent"]
        assert again["intent_status"] == "done"
        assert again["spare"] == first["spare"]
        assert again["job"] == first["job"]
        assert again["links"] == first["links"]
        assert again["stages"] == first["stages"]
    assert _intents(cp) == intents  # nothing reconfigured
    repeats = [e for e in cp.events(0, 5000) if e["kind"] == "failure-reported" and "repeat_of" in e]
    assert [e["repeat_of"] for e in repeats] == [first["intent"]] * 2
    with pytest.raises(ServiceError) as err:  # a job the recovery did not concern
        cp.report_failure("job-99", accelerator="gpu2")
    assert err.value.kind == "not-found"


def test_a_repeat_after_a_crash_that_rolled_the_recovery_forward(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(crash.os, "kill", lambda pid, sig: (_ for _ in ()).throw(Died()))
    cp = ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric(), crasher=crash.Crasher("verified"))
    job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    with pytest.raises(Died):  # the reporter never got an answer
        cp.report_failure(job["id"], accelerator="gpu1", detected_s=time.time())
    cp2 = ControlPlane(Store(tmp_path / "cp.db"), bench, None, crasher=crash.Crasher(None))
    try:
        loaded = [e for e in cp2.events(0, 5000) if e["kind"] == "state-loaded"][-1]
        assert [a["action"] for a in loaded["actions"]] == ["rolled-forward"]
        again = cp2.report_failure(job["id"], accelerator="gpu1")
        assert again["replayed"] is True
        assert again["intent_status"] == "rolled-forward"
        assert again["failed"] == "gpu1"
        assert again["spare"] in again["job"]["accelerators"]
        assert cp2.job(job["id"])["accelerators"] == again["job"]["accelerators"]
        assert again["stages"] == []  # the service died before it could write the measured ones
    finally:
        cp2.close()
        cp.close()


def test_a_repeated_tbu_report_is_answered_with_its_recovery(cp):
    cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    tbu = cp.mesh.tbu_names[cp.state.plan.links[0].route.tbus[1]]
    first = cp.report_failure(None, tbu=tbu, state="dead")
    again = cp.report_failure(None, tbu=tbu, state="dead")
    assert again["replayed"] is True
    assert again["intent"] == first["intent"]


def test_a_tbu_reply_names_the_job_it_rerouted_not_the_chip(cp):
    job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    tbu = cp.mesh.tbu_names[cp.state.plan.links[0].route.tbus[1]]
    rec = cp.report_failure(None, tbu=tbu, state="dead")
    assert rec["jobs_rerouted"] == [job["id"]]
    assert rec["job_id"] == job["id"]
    assert rec["job"]["name"] == job["name"]
    assert len(rec["links"]) == len(job["links"])


def test_a_reply_over_several_jobs_names_no_single_job(cp):
    a = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2"])
    b = cp.place_job(accelerators=["gpu4", "gpu5", "gpu6"])
    rec = cp.report_failure(None, accelerators=["gpu1", "gpu5"])
    assert rec["job_id"] is None
    assert rec["job"] is None
    assert {lk["job"] for lk in rec["links"]} == {a["id"], b["id"]}


def test_a_busy_accelerator_refusal_is_logged(cp):
    cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    for members in (["gpu0", "gpu4"], ["spare0", "gpu4"]):
        with pytest.raises(ServiceError) as err:
            cp.place_job(accelerators=members)
        assert err.value.kind == "impossible"
    refused = [e for e in cp.events(0, 5000) if e["kind"] == "job-refused"]
    assert len(refused) == 2
    assert "already runs" in refused[0]["reason"]
    assert "spare" in refused[1]["reason"]


def test_repair_is_idempotent_and_an_unknown_name_is_404(cp):
    job = cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    cp.report_failure(job["id"], accelerator="gpu1")
    assert cp.repair("gpu1") == {"accelerator": "gpu1", "failed": False, "changed": True}
    assert cp.repair("gpu1") == {"accelerator": "gpu1", "failed": False, "changed": False}
    assert cp.repair("gpu5") == {"accelerator": "gpu5", "failed": False, "changed": False}
    assert [e["accelerator"] for e in cp.events(0, 5000) if e["kind"] == "accelerator-repaired"] == ["gpu1"]
    with pytest.raises(ServiceError) as err:
        cp.repair("gpu99")
    assert err.value.kind == "not-found"


@pytest.mark.parametrize("detected_s", [True, "now"], ids=["a-boolean", "a-string"])
def test_a_detection_time_that_is_not_a_number_is_refused_as_such(cp, bench, detected_s):
    # float(True) is 1.0 and float("1796...") a time: the Python API took both as epoch seconds
    value = f"{time.time():.0f}" if detected_s == "now" else detected_s
    cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    with pytest.raises(ServiceError, match="detected_s must be a number of epoch seconds, not") as err:
        cp.report_failure(None, accelerator="gpu1", detected_s=value)
    assert err.value.kind == "input"
    assert cp.status()["failed_accelerators"] == []

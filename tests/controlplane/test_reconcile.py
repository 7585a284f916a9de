"""Reconciliation rules, step by step, for every kind of reconfiguration (in-process, real transports).

The process "dies" at a crash step (the hook raises instead of SIGKILL, so one test can
die many times), the control plane is dropped without any cleanup, and a new one is built
on the same database and the same simulated bench (heater driver on a pty): it must read
the chip back and roll forward, back, or re-apply the committed currents, exactly as the
rules say. The SIGKILL version of this runs in test_crash_safety.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from controlplane import crash
from controlplane.service import ControlPlane
from controlplane.store import Store
from instruments.controller import MEND_TOLERANCE_MA
from photonics.fabric import default_fabric


class Died(BaseException):
    """Stands for SIGKILL: nothing after it runs, no except clause of ours catches it."""


@pytest.fixture
def fake_kill(monkeypatch):
    def kill(pid, sig):
        raise Died

    monkeypatch.setattr(crash.os, "kill", kill)


def _fresh(tmp_path, bench, crasher=None) -> ControlPlane:
    return ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric(), crasher=crasher)


def _restart(tmp_path, bench) -> tuple[ControlPlane, dict]:
    cp = ControlPlane(Store(tmp_path / "cp.db"), bench, None, crasher=crash.Crasher(None))
    loaded = [e for e in cp.events(0, 5000) if e["kind"] == "state-loaded"][-1]
    return cp, loaded


def _agree(cp: ControlPlane, bench) -> None:
    chip = bench.sim.heater.currents()[: cp.mesh.n_heaters]
    assert np.abs(chip - cp.state.currents).max() <= MEND_TOLERANCE_MA
    assert cp.store.open_intents(cp.chip_id) == []


OPS = {
    "failover": lambda cp: cp.report_failure(None, accelerator="gpu1"),
    "tbu": lambda cp: cp.report_failure(None, tbu=_tbu_on_a_route(cp), state="dead"),
    "place": lambda cp: cp.place_job(accelerators=["gpu4", "gpu5", "gpu6", "gpu7"]),
    "delete": lambda cp: cp.delete_job("job-1"),
}
CASES = [
    ("intent", "rolled-back"),
    ("write:1", "reverted"),  # or rolled-forward when the program was one command
    ("written", "rolled-forward"),
    ("verified", "rolled-forward"),
    ("committed", None),  # the intent was done: nothing to reconcile
]


def _tbu_on_a_route(cp: ControlPlane) -> str:
    return cp.mesh.tbu_names[cp.state.plan.links[0].route.tbus[1]]


@pytest.mark.parametrize("kind", sorted(OPS))
@pytest.mark.parametrize(("step", "action"), CASES)
def test_each_step_of_each_reconfiguration(kind, step, action, bench, tmp_path, fake_kill):
    cp = _fresh(tmp_path, bench, crash.Crasher(step, (kind,)))
    if kind != "place":
        cp.place_job(accelerators=["gpu0", "gpu1", "gpu2", "gpu3"])
    before = cp.state
    with pytest.raises(Died):
        OPS[kind](cp)
    cp2, loaded = _restart(tmp_path, bench)
    _agree(cp2, bench)
    done = [a for a in loaded["actions"] if "intent" in a]
    if action is None:
        assert done == []
    else:
        allowed = {action, "rolled-forward"} if step == "write:1" else {action}
        assert len(done) == 1
        assert done[0]["action"] in allowed
        assert done[0]["reconfiguration"] == kind
        action = done[0]["action"]
    forward = action in ("rolled-forward", None)
    if forward:
        assert list(cp2.state.plan.job.links) != list(before.plan.job.links) or kind == "tbu"
    else:  # rolled back or reverted: the rack is exactly as before the request
        assert list(cp2.state.plan.job.links) == list(before.plan.job.links)
        assert np.abs(cp2.state.currents - before.currents).max() <= MEND_TOLERANCE_MA
        assert cp2.store.allocations(cp2.chip_id) == {
            a: (j, False) for j, job in before.jobs.items() for a in job.accelerators
        }
    cp2.close()


def test_drift_is_repaired_at_start(bench, tmp_path):
    cp = _fresh(tmp_path, bench)
    cp.place_job(count=4)
    committed = cp.state.currents.copy()
    cp.close()
    ch = int(np.flatnonzero(committed)[0])
    bench.controller.driver.set_current(ch, 0.0)  # someone changes the chip while the service is down
    cp2, loaded = _restart(tmp_path, bench)
    assert {"action": "drift-repaired", "channels_differing": 1} in loaded["actions"]
    _agree(cp2, bench)
    assert abs(bench.sim.heater.currents()[ch] - committed[ch]) <= MEND_TOLERANCE_MA
    cp2.close()

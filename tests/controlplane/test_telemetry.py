"""Telemetry against the ControlPlane over the simulated bench's real transports."""

from __future__ import annotations

import time

import pytest

from controlplane import telemetry
from controlplane.telemetry import TelemetryError
from instruments.link_monitor import DEBOUNCE_POLLS
from tests.controlplane.rack import wait_for

PERIOD_S = 0.02


QUIET_POLLS = 10  # polls after which nothing more is expected to happen (DEBOUNCE_POLLS is 3)


def _more_polls(handle, n):
    """Wait until the loop has polled ``n`` more times (not a time: a loaded machine polls less)."""
    start = handle.polls
    wait_for(lambda: handle.polls >= start + n, what=f"{n} more polls")


def _lit(handle):
    snap = handle.snapshot()
    links = snap["links"]
    return len(links) == 8 and all(v["armed"] and v["dark"] is False for v in links.values())


def test_auto_policy_recovers_a_killed_accelerator_with_the_measured_detect_stage(rack):
    handle = telemetry.start(rack.cp, PERIOD_S, "auto")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")
        kill = rack.sim.kill_transmitter("gpu2")
        kill_epoch = time.time() - (time.monotonic() - kill["t_s"])
        (rec,) = wait_for(lambda: rack.events("recovery"), what="the recovery")
        (dark,) = rack.events("accelerator-dark")
        assert dark["accelerator"] == "gpu2"
        assert dark["links"] == ["gpu2->gpu3"]
        assert dark["polls"] == DEBOUNCE_POLLS
        assert dark["policy"] == "auto"
        assert rec["failed"] == "gpu2"
        assert rec["source"] == "telemetry"
        detect = next(s for s in rec["stages"] if s["stage"] == "detect")
        assert detect["start_s"] <= kill_epoch <= detect["end_s"]  # the stage spans the real kill
        assert (detect["end_s"] - detect["start_s"]) * 1e3 >= dark["detect_ms"]  # and runs to the report
        status = rack.cp.status()
        assert "gpu2" in status["failed_accelerators"]
        spare = rec["spare"]
        names = [lk["link"] for lk in status["links"]]
        assert f"gpu1->{spare}" in names
        assert f"{spare}->gpu3" in names
        # the spare's new links come up and are watched; nothing else is declared dark
        wait_for(
            lambda: f"{spare}->gpu3" in handle.snapshot()["links"] and _lit(handle),
            what="the recovered ring lit",
        )
        _more_polls(handle, QUIET_POLLS)
        assert [e["accelerator"] for e in rack.events("accelerator-dark")] == ["gpu2"]
        assert len(rack.events("recovery")) == 1
    finally:
        handle.stop()
    assert not handle.running


@pytest.mark.slow  # three placements verified by light: 9.7 s at load ~5
def test_jobs_deleted_and_placed_again_are_not_failures(rack):
    handle = telemetry.start(rack.cp, PERIOD_S, "auto")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")
        for _ in range(3):  # the links go dark while the service rewrites the chip: not a failure
            (job,) = rack.cp.status()["jobs"]
            rack.cp.delete_job(job["id"])
            rack.place_ring()
            wait_for(lambda: _lit(handle), what="the new ring lit")
        _more_polls(handle, QUIET_POLLS)
        assert rack.events("accelerator-dark") == []
        assert rack.events("link-dark") == []
        assert rack.events("recovery") == []
    finally:
        handle.stop()


def test_alert_policy_only_logs(rack):
    handle = telemetry.start(rack.cp, PERIOD_S, "alert")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")
        rack.sim.kill_transmitter("gpu5")
        (dark,) = wait_for(lambda: rack.events("accelerator-dark"), what="the alert")
        assert dark["accelerator"] == "gpu5"
        assert dark["policy"] == "alert"
        assert dark["detect_min_ms"] <= dark["detect_ms"]
        _more_polls(handle, QUIET_POLLS)
        assert rack.events("recovery") == []
        assert rack.cp.status()["failed_accelerators"] == []
        assert handle.detections[0]["recovery"] is None
    finally:
        handle.stop()


def test_live_receiver_readings_reach_the_status(rack):
    handle = telemetry.start(rack.cp, PERIOD_S, "alert")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")
        links = wait_for(
            lambda: (
                [lk for lk in rack.cp.status()["links"] if "live_rx_power_dbm" in lk]
                if all("live_rx_power_dbm" in lk for lk in rack.cp.status()["links"])
                else None
            ),
            what="live readings in the status",
        )
        snap = handle.snapshot()
        for lk in links:
            assert lk["live_rx_power_dbm"] == pytest.approx(snap["links"][lk["link"]]["rx_dbm"], abs=0.5)
            assert lk["live_margin_db"] > 0
            assert lk["los"] is False
    finally:
        handle.stop()


def test_live_margins_agree_with_the_planned_ones(rack):
    """Live and planned margin of each link differ only by the launch power above the budget's
    worst case: the simulated modules launch +1 dBm, the budget assumes the lane's 0 dBm.
    (They differed by 12 dB: the simulator left out the facets and access waveguides the
    budget counts.)"""
    launch_excess_db = 1.0 - rack.fabric.lane(rack.fabric.accelerator("gpu0").tx[0]).tx_power_dbm
    handle = telemetry.start(rack.cp, PERIOD_S, "alert")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")

        def live():
            links = rack.cp.status()["links"]
            return links if all(lk.get("live_margin_db") is not None for lk in links) else None

        for lk in wait_for(live, what="live margins in the status"):
            excess = lk["live_margin_db"] - lk["margin_db"]
            assert excess == pytest.approx(launch_excess_db, abs=0.5), lk["link"]
    finally:
        handle.stop()


def test_no_spare_left_is_logged_and_the_loop_goes_on(rack):
    handle = telemetry.start(rack.cp, PERIOD_S, "auto")
    try:
        wait_for(lambda: _lit(handle), what="every ring link lit")
        for k, name in enumerate(("gpu1", "gpu6")):
            rack.sim.kill_transmitter(name)
            wait_for(lambda k=k: len(rack.events("recovery")) == k + 1, what=f"recovery of {name}")
            wait_for(lambda: _lit(handle), what="the recovered ring lit")
        rack.sim.kill_transmitter("gpu4")  # no spare left
        err = wait_for(
            lambda: [e for e in rack.events("telemetry-error") if e.get("accelerator") == "gpu4"],
            what="the refused recovery",
        )
        assert "spare" in err[0]["error"]
        polls = handle.polls
        wait_for(lambda: handle.polls > polls + 3, what="more polls")
        assert handle.running
    finally:
        handle.stop()


def test_a_failing_poll_is_logged_and_the_loop_goes_on(rack, monkeypatch):
    real = rack.cp.status
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("database briefly unavailable")
        return real()

    monkeypatch.setattr(rack.cp, "status", flaky)
    monkeypatch.setattr(telemetry, "ERROR_BACKOFF_S", 0.05)
    handle = telemetry.start(rack.cp, PERIOD_S, "auto")
    try:
        (err,) = wait_for(lambda: rack.events("telemetry-error"), what="the logged error")
        assert err["error"] == "RuntimeError: database briefly unavailable"
        wait_for(lambda: _lit(handle), what="polling again after the error")
    finally:
        handle.stop()


def test_bad_arguments_are_refused_in_one_line(rack):
    with pytest.raises(TelemetryError, match="policy must be one of auto, alert, not 'panic'"):
        telemetry.start(rack.cp, PERIOD_S, "panic")
    with pytest.raises(TelemetryError, match="period must be at least"):
        telemetry.start(rack.cp, 0.0, "auto")


def test_a_bench_without_transceivers_is_refused(rack, monkeypatch):
    monkeypatch.setattr(rack.bench, "transceivers", {})
    with pytest.raises(TelemetryError, match="no transceivers to watch"):
        telemetry.start(rack.cp, PERIOD_S, "auto")

"""`lumion serve` says which heater map it programs through, and warns when it is the ideal law."""

from __future__ import annotations

import signal

import pytest

from instruments.sim.chip import Chip
from photonics.topology import smartlight
from tests.controlplane.rack import oracle_map

WARNING = "warning: no calibration map"


def _stderr_after_stop(svc) -> str:
    svc.proc.send_signal(signal.SIGTERM)
    _, err = svc.proc.communicate(timeout=30)
    svc.client.close()
    return err


@pytest.mark.slow
def test_no_map_with_detection_on_is_announced_and_warned(service_factory):
    svc = service_factory("--telemetry-period-s", "1")
    assert svc.info["heater_map"] == "ideal"
    err = _stderr_after_stop(svc)
    assert WARNING in err
    assert "--map" in err
    assert len([line for line in err.splitlines() if WARNING in line]) == 1  # one line


@pytest.mark.slow
def test_without_detection_there_is_nothing_to_warn_about(service_factory):
    svc = service_factory()  # the fixture's --telemetry-period-s 0
    assert svc.info["heater_map"] == "ideal"
    assert WARNING not in _stderr_after_stop(svc)


@pytest.mark.slow
def test_a_given_or_recorded_map_is_announced_as_fitted(service_factory, tmp_path):
    oracle_map(Chip(smartlight(), 0)).save(tmp_path / "map.json")
    svc = service_factory("--map", str(tmp_path / "map.json"), "--telemetry-period-s", "1")
    assert svc.info["heater_map"] == "fitted"
    assert WARNING not in _stderr_after_stop(svc)
    again = service_factory("--telemetry-period-s", "1")  # same database, no --map: the recorded map
    assert again.info["heater_map"] == "fitted"
    assert WARNING not in _stderr_after_stop(again)

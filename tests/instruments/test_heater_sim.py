"""The heater driver against its simulator over a real pty and over lumionsim://."""

import numpy as np
import pytest

from instruments.errors import (
    ConnectionLostError,
    InstrumentTimeoutError,
    OverCurrentError,
    OverVoltageError,
)


@pytest.fixture(params=["pty", "url"])
def driver(request):
    return request.getfixturevalue(f"{request.param}_driver")


def test_identity_and_channels(driver, small_chip):
    assert driver.n_channels % 8 == 0
    assert driver.n_channels >= small_chip.mesh.n_heaters
    assert small_chip.chip_id in driver.identity()


def test_currents_reach_the_chip(driver, small_chip):
    driver.set_current(3, 1.5)
    driver.set_block(5, [0.5, 0.75, 1.0])
    expected = np.zeros(small_chip.mesh.n_heaters)
    expected[3], expected[5:8] = 1.5, [0.5, 0.75, 1.0]
    np.testing.assert_allclose(small_chip.currents_ma, expected)
    np.testing.assert_allclose(driver.currents()[: len(expected)], expected)
    assert driver.current(6) == pytest.approx(0.75)
    v, i, p = driver.vip()
    np.testing.assert_allclose(v[: len(expected)], small_chip.voltages_v(), atol=1e-4)
    np.testing.assert_allclose(p, v * i, atol=1e-3)
    assert driver.voltage(3) == pytest.approx(small_chip.voltages_v()[3], abs=1e-4)


def test_voltage_mode_sets_the_matching_current(driver, small_chip):
    driver.set_voltage(2, 0.5)
    assert small_chip.voltages_v()[2] == pytest.approx(0.5, abs=1e-6)


def test_device_limits_answer_error_codes(driver, heater_device):
    driver.set_max_voltage(0, 0.1)
    with pytest.raises(OverVoltageError, match="compliance"):
        driver.set_current(0, 5.0)
    heater_device.imax[1] = 1.0  # a limit set from the front panel, unknown to the driver
    with pytest.raises(OverCurrentError):
        driver.set_current(1, 2.0)


def test_transient_faults_are_retried(driver, heater_device, small_chip):
    heater_device.inject("garbage")
    driver.set_current(1, 1.0)
    heater_device.inject("drop")
    driver.set_current(2, 2.0)
    heater_device.inject("error", code=10, channel=3)
    driver.set_current(3, 3.0)
    np.testing.assert_allclose(small_chip.currents_ma[1:4], [1.0, 2.0, 3.0])


def test_timeouts_are_retried_then_raised(driver, heater_device):
    heater_device.inject("timeout")
    driver.set_current(1, 1.0)
    heater_device.inject("timeout", count=3)
    with pytest.raises(InstrumentTimeoutError):
        driver.set_current(1, 1.5)


def test_drop_without_retries_raises_and_reconnect_recovers(driver, heater_device):
    driver.retries = 0
    heater_device.inject("drop")
    with pytest.raises(ConnectionLostError, match="reconnect"):
        driver.set_current(1, 1.0)
    driver.reconnect()
    driver.set_current(1, 1.0)
    assert driver.current(1) == pytest.approx(1.0)

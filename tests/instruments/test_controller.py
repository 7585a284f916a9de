"""Mesh controller safety: limits before sending, deltas only, all-or-nothing, serialised."""

import threading

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from instruments.controller import MeshController, runs
from instruments.errors import ChipStateUnknownError, LimitError, WriteAbortedError
from photonics.configuration import Configuration


@pytest.fixture
def controller(pty_driver, small_chip):
    return MeshController(pty_driver, small_chip.mesh, max_current_ma=10.0, max_total_power_mw=50.0)


def test_runs():
    assert runs(np.array([], int)) == []
    assert runs(np.array([0, 1, 2, 5])) == [(0, 3), (5, 1)]


def link_counts(link):
    """What the simulated line carried so far, counted at its far end: bytes in, bytes out,
    answers, and the time a real line at the driver's rate would have been busy (s)."""
    return np.array([link.bytes_received, link.bytes_sent, link.answers, link.line_time_s])


def test_program_writes_only_changes(controller, small_chip, pty_link):
    mesh = small_chip.mesh
    bar = Configuration(np.zeros(mesh.n_tbus))
    r1 = controller.program(bar)
    want = IdealMap(mesh.n_heaters).currents_for(bar, 10.0)
    np.testing.assert_allclose(small_chip.currents_ma, np.round(want, 4), atol=1e-4)
    assert r1.channels == int((want > 0).sum())
    assert controller.program(bar).channels == 0
    one = bar.cross_fraction.copy()
    one[2] = 1.0
    before = link_counts(pty_link)
    r2 = controller.program(Configuration(one))
    heard, said, answers, busy_s = link_counts(pty_link) - before
    assert r2.channels == 1
    assert r2.commands == answers == 1
    assert r2.bytes_written == heard == len(b"I4=0.0000\nI4?\n")  # the setting and its read-back
    assert r2.bytes_read == said == len(b"OK\n+0.0000 mA\n")
    # the time on the wire is the time the simulated line was busy, by its own clock
    assert r2.wire_time_s == pytest.approx(busy_s)
    assert controller.program(Configuration(one)).channels == 0


@pytest.mark.parametrize("baudrate", [9600, 115200])
def test_the_reported_wire_time_is_the_lines_at_the_rate_the_driver_set(small_chip, pty_link, baudrate):
    """A user sizing a failover budget reads wire_time_s: it must follow the real line rate."""
    from instruments.heater_driver import HeaterDriver

    drv = HeaterDriver.open(pty_link.path, timeout_s=2.0, baudrate=baudrate)
    try:
        assert pty_link.line_rate() == baudrate  # what pyserial set on the line
        ctl = MeshController(drv, small_chip.mesh)
        target = ctl.currents
        target[[1, 2, 3, 9]] = [1.25, 2.5, 0.75, 3.0]
        before = link_counts(pty_link)
        report = ctl.set_currents(target)
        heard, said, answers, busy_s = link_counts(pty_link) - before
        assert (report.bytes_written, report.bytes_read, report.commands) == (heard, said, answers)
        assert report.wire_time_s == pytest.approx(busy_s)
    finally:
        drv.close()


@pytest.mark.parametrize("bad", [11.0, -1.0, np.nan])
def test_over_current_sends_nothing(controller, small_chip, pty_link, bad):
    before = pty_link.device.commands
    c = np.zeros(small_chip.mesh.n_heaters)
    c[0], c[3] = 1.0, bad
    with pytest.raises(LimitError, match="heater:3"):
        controller.set_currents(c)
    assert pty_link.device.commands == before
    assert not small_chip.currents_ma.any()


def test_over_total_power_sends_nothing(controller, small_chip, pty_link):
    before = pty_link.device.commands
    with pytest.raises(LimitError, match="total heater power"):
        controller.set_currents(np.full(small_chip.mesh.n_heaters, 3.0))
    assert pty_link.device.commands == before


def test_midwrite_disconnect_restores_previous_currents(controller, small_chip, heater_device):
    n = small_chip.mesh.n_heaters
    first = np.zeros(n)
    first[::3] = 1.0
    controller.set_currents(first)
    controller.driver.retries = 0
    heater_device.inject("drop", after=2)  # third command of the next write is lost
    second = np.where(np.arange(n) % 2 == 0, 2.0, 0.0)
    with pytest.raises(WriteAbortedError, match="restored"):
        controller.set_currents(second)
    np.testing.assert_allclose(small_chip.currents_ma, first, atol=1e-4)
    np.testing.assert_allclose(controller.currents, first)
    controller.set_currents(second)  # and the link works afterwards
    np.testing.assert_allclose(small_chip.currents_ma, second, atol=1e-4)


def test_device_error_midwrite_restores(controller, small_chip, heater_device):
    n = small_chip.mesh.n_heaters
    target = np.where(np.arange(n) % 2 == 0, 1.0, 0.0)
    heater_device.inject("error", after=6, code=1, channel=7)  # the 4th setting (each has a read-back)
    with pytest.raises(WriteAbortedError):
        controller.set_currents(target)
    assert not small_chip.currents_ma.any()


def test_failed_restore_says_state_unknown(controller, small_chip, heater_device):
    controller.driver.retries = 0
    heater_device.inject("error", after=2, code=1, count=5)
    with pytest.raises(ChipStateUnknownError, match="resync"):
        controller.set_currents(np.where(np.arange(small_chip.mesh.n_heaters) % 2 == 0, 1.0, 0.0))
    heater_device.clear_faults()
    np.testing.assert_allclose(controller.resync(), small_chip.currents_ma, atol=1e-4)


def test_two_threads_are_serialised(controller, small_chip):
    """Each write is atomic on the wire: the chip ends in one of the two requests, never a mix."""
    n = small_chip.mesh.n_heaters
    a = np.where(np.arange(n) % 2 == 0, 1.0, 0.0)
    b = np.where(np.arange(n) % 2 == 1, 0.5, 0.0)
    errors = []

    def worker(c):
        try:
            for _ in range(5):
                controller.set_currents(c)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(c,)) for c in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    final = small_chip.currents_ma
    assert np.allclose(final, a, atol=1e-4) or np.allclose(final, b, atol=1e-4)
    np.testing.assert_allclose(controller.currents, final, atol=1e-4)


def test_controller_refuses_too_few_channels(small_chip):
    from instruments.errors import BenchConfigError
    from instruments.heater_driver import HeaterDriver
    from instruments.testing import expected_protocol

    with expected_protocol(HeaterDriver, [], n_channels=4) as drv, \
            pytest.raises(BenchConfigError, match="module"):
        MeshController(drv, small_chip.mesh, sync=False)


@pytest.mark.parametrize("protocol", ["binary", "ascii"])
def test_the_failover_timing_model_counts_the_bytes_the_driver_really_sends(small_chip, pty_link, protocol):
    """photonics' TimingModel (no instruments import) against the line, exchange for exchange.

    Bytes, exchanges and time are those the simulated line carried, counted at its far end
    on its own clock, not the driver's report restated.
    """
    from instruments.heater_driver import HeaterDriver
    from photonics.fabric import TimingModel

    drv = HeaterDriver.open(pty_link.path, timeout_s=0.5, binary=protocol == "binary")
    try:
        ctl = MeshController(drv, small_chip.mesh)
        ctl.set_currents(ctl.currents)  # a running controller has confirmed every channel once
        target = ctl.currents
        program = {1: 1.25, 2: 2.5, 3: 0.75, 7: 3.0, 8: 1.5, 15: 0.5}  # runs split at module 0|1
        for ch, v in program.items():
            target[ch] = v
        before = link_counts(pty_link)
        ctl.set_currents(target)
        heard, said, answers, busy_s = link_counts(pty_link) - before
        model = TimingModel(protocol=protocol)
        assert answers == len(model.exchanges(program)) == 4
        assert heard + said == model.write_bytes(program)
        assert busy_s * 1e3 == pytest.approx(model.write_ms(program))
    finally:
        drv.close()


def test_after_state_unknown_the_next_program_reads_back_first(controller, small_chip, heater_device):
    n = small_chip.mesh.n_heaters
    controller.driver.retries = 0
    heater_device.inject("error", after=2, code=1, count=5)
    with pytest.raises(ChipStateUnknownError):
        controller.set_currents(np.where(np.arange(n) % 2 == 0, 1.0, 0.0))
    assert not controller.state_known
    heater_device.clear_faults()
    target = np.where(np.arange(n) % 3 == 0, 0.75, 0.25)
    controller.set_currents(target)  # no resync() call: the controller reads back by itself
    assert controller.state_known
    np.testing.assert_allclose(small_chip.currents_ma, target, atol=1e-4)
    np.testing.assert_allclose(controller.currents, small_chip.currents_ma, atol=1e-4)

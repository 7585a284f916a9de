"""Shared fixtures: a small chip, its simulated heater driver on a pty and on lumionsim://."""

import itertools

import pytest

from instruments.heater_driver import HeaterDriver
from instruments.sim.chip import Chip
from instruments.sim.heater_device import HeaterDeviceSim, PtyLink, register, unregister
from instruments.sim.link_clock import SimulatedClock
from instruments.sim.pty_oracle import oracle_opener
from instruments.transport import SerialTransport
from photonics.topology import hexagonal

_names = itertools.count()


@pytest.fixture
def small_chip():
    return Chip(hexagonal(1, 2), seed=3)


@pytest.fixture
def heater_device(small_chip):
    return HeaterDeviceSim(small_chip)


@pytest.fixture
def pty_link(heater_device):
    link = PtyLink(heater_device)
    yield link
    link.close(timeout_s=2.0)


# The pty driver's quiet time (s): it reads through the pty oracle (instruments/sim/pty_oracle.py),
# so every reply that comes has arrived before it reads and this only waits out silence that is
# certain. Above the module's FRAME_TIMEOUT_S (50 ms), as a real driver's timeout is, so a command
# a fault cut in half has gone stale before the resend: the same path under any load.
PTY_QUIET_S = 0.06
# The lumionsim:// driver's timeout (s), waited on the module's simulated clock (not slept).
URL_TIMEOUT_S = 0.2


@pytest.fixture
def pty_driver(pty_link):
    transport = SerialTransport(pty_link.path, timeout_s=PTY_QUIET_S, opener=oracle_opener(pty_link))
    drv = HeaterDriver(transport)
    yield drv
    drv.close()


@pytest.fixture
def url_driver(heater_device):
    """The driver on ``heater_device`` over lumionsim://, the module on a simulated clock
    (instruments/sim/link_clock.py): nothing else reaches this device in a test.
    """
    heater_device.clock = SimulatedClock()
    name = f"test{next(_names)}"
    url = register(name, heater_device)
    drv = HeaterDriver.open(url, timeout_s=URL_TIMEOUT_S)
    yield drv
    drv.close()
    unregister(name)

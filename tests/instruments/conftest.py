"""Shared fixtures: a small chip, its simulated heater driver on a pty and on lumionsim://."""

import itertools

import pytest

from instruments.heater_driver import HeaterDriver
from instruments.sim.chip import Chip
from instruments.sim.heater_device import HeaterDeviceSim, PtyLink, register, unregister
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


@pytest.fixture
def pty_driver(pty_link):
    drv = HeaterDriver.open(pty_link.path, timeout_s=0.5)
    yield drv
    drv.close()


@pytest.fixture
def url_driver(heater_device):
    name = f"test{next(_names)}"
    url = register(name, heater_device)
    drv = HeaterDriver.open(url, timeout_s=0.2)
    yield drv
    drv.close()
    unregister(name)

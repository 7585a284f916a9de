"""instruments.light_meter: which meter reads a link, and a new link judged by its own light."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from instruments.errors import InstrumentError
from instruments.light_meter import FLOOR_DBM, OFF_MESH_LOSS_DB, TRANSCEIVERS, LightMeter, Probe
from photonics.topology import hexagonal


class Module:
    """One lane each way; RX power = own transmitter's share + the stray light of others (mW)."""

    def __init__(self, world, name):
        self.world, self.name = world, name
        self.disabled = False
        self.fail_enable = False

    def tx_power_dbm(self):
        return np.array([-70.0 if self.disabled else 1.0])

    def rx_power_dbm(self):
        mw = self.world.stray_mw + (0.0 if self.world.modules["tx"].disabled else self.world.own_mw)
        return np.array([10 * math.log10(mw)])

    def tx_disabled(self):
        return np.array([self.disabled])

    def set_tx_disable(self, lane, disabled):
        if not disabled and self.fail_enable:
            raise InstrumentError(f"{self.name}: I2C NACK")
        self.disabled = disabled


def _bench(own_mw, stray_mw):
    mesh = hexagonal(1, 2)
    world = SimpleNamespace(own_mw=own_mw, stray_mw=stray_mw)
    world.modules = {"tx": Module(world, "tx"), "rx": Module(world, "rx")}
    bench = SimpleNamespace(mesh=mesh, transceivers=world.modules,
                            transceiver_ports={"tx": {"tx_ports": [0], "rx_ports": []},
                                               "rx": {"tx_ports": [], "rx_ports": [3]}})
    return bench, world


PROBE = Probe(0, 3, -2.0, 0.0)
PLANNED = 1.0 - OFF_MESH_LOSS_DB - 2.0  # DOM launch less facets and access plus the route


def test_stray_light_is_read_as_the_link_unless_its_own_light_is_confirmed():
    bench, world = _bench(own_mw=0.0, stray_mw=10 ** (PLANNED / 10))  # a spare's laser swapped in
    meter = LightMeter(bench)
    plain = meter.measure([PROBE])[0]
    assert plain.meter == TRANSCEIVERS
    assert plain.planned_dbm == pytest.approx(PLANNED)
    assert plain.measured_dbm == pytest.approx(PLANNED, abs=0.01)  # fooled: reads like the plan
    own = meter.measure([PROBE], identify=[0])[0]
    assert own.measured_dbm == FLOOR_DBM  # its own light: nothing
    assert own.dark_dbm == pytest.approx(PLANNED, abs=0.01)
    assert not world.modules["tx"].disabled  # enabled again


def test_a_right_link_keeps_its_light_when_confirmed():
    bench, _ = _bench(own_mw=10 ** (PLANNED / 10), stray_mw=1e-6)
    own = LightMeter(bench).measure([PROBE], identify=[0])[0]
    assert own.measured_dbm == pytest.approx(PLANNED, abs=0.01)


def test_a_lane_that_cannot_be_enabled_again_is_named_not_measured():
    bench, world = _bench(own_mw=10 ** (PLANNED / 10), stray_mw=1e-6)
    world.modules["tx"].fail_enable = True
    r = LightMeter(bench).measure([PROBE], identify=[0])[0]
    assert r.meter is None
    assert r.measured_dbm is None
    assert "could not be enabled again" in r.reason


def test_a_link_no_meter_reaches_says_why():
    bench, _ = _bench(own_mw=1.0, stray_mw=1e-6)
    r = LightMeter(bench).measure([Probe(1, 3, -2.0, 0.0)])[0]
    assert r.meter is None
    assert "no transceiver lane transmits into" in r.reason

"""instruments.light_meter: which meter reads a link, and a new link judged by its own light."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from instruments.errors import InstrumentError
from instruments.light_meter import (
    DOM_REFRESH_WAIT_S,
    FLOOR_DBM,
    OFF_MESH_LOSS_DB,
    TRANSCEIVERS,
    LightMeter,
    Probe,
    refresh_wait_s,
)
from photonics.topology import hexagonal

FAST_MODULE_PERIOD_S = 0.01  # a module whose datasheet says its monitors sample every 10 ms


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


def _sim_link(period_s, declared=None):
    """A simulated SFF-8636 module lighting mesh port 0 and another reading the port where
    most of that light leaves the simulated chip; both sample their monitors every ``period_s``
    and declare ``declared`` as their period (None: not declared, as a bench config may leave it).
    """
    from instruments.sim.chip import Chip
    from instruments.sim.transceivers import SimI2CBus, SimTransceiver, TransceiverBench
    from instruments.transceiver import TransceiverModule
    from photonics.topology import smartlight

    chip = Chip(smartlight(), seed=2, crosstalk_fraction=0.0)
    out = chip.output_power_mw(0, 1550.0, 1.0)
    dst = int(np.argmax([x if p != 0 else 0.0 for p, x in enumerate(out)]))
    a = SimTransceiver("a", "sff8636", [0], [], monitor_period_s=period_s)
    b = SimTransceiver("b", "sff8636", [], [dst], monitor_period_s=period_s)
    TransceiverBench(chip, [a, b])
    modules = {n: TransceiverModule(SimI2CBus(m), name=n, monitor_period_s=declared)
               for n, m in (("a", a), ("b", b))}
    bench = SimpleNamespace(mesh=chip.mesh, transceivers=modules,
                            transceiver_ports={"a": {"tx_ports": [0], "rx_ports": []},
                                               "b": {"tx_ports": [], "rx_ports": [dst]}})
    return bench, Probe(0, dst, 10 * math.log10(out[dst]), 1.0), modules


@pytest.mark.parametrize(("period_s", "declared"), [(0.0, None), (DOM_REFRESH_WAIT_S, None),
                                                     (FAST_MODULE_PERIOD_S, FAST_MODULE_PERIOD_S)])
def test_the_dark_read_waits_for_the_modules_monitor_refresh(period_s, declared):
    # a module samples its monitors every few ms to ~100 ms: read at once after the TX disable,
    # the receiver returned the sample taken while lit, and the link's own light read as nothing.
    # Undeclared, the slowest period is waited for; declared (bench config), the module's own.
    bench, probe, modules = _sim_link(period_s, declared)
    meter = LightMeter(bench)
    assert meter.refresh_s == (declared or DOM_REFRESH_WAIT_S)
    plain = meter.measure([probe])[0]
    own = meter.measure([probe], identify=[0])[0]
    assert plain.measured_dbm > FLOOR_DBM + 20  # the link is lit
    assert own.dark_dbm < plain.measured_dbm - 20  # the dark read saw the laser off
    assert own.measured_dbm == pytest.approx(plain.measured_dbm, abs=0.1)
    # and when measure returns, the lane enabled again is lit in the receiver's monitors
    assert modules["b"].rx_power_dbm()[0] == pytest.approx(plain.measured_dbm, abs=0.1)


def test_the_meter_waits_the_longest_period_its_modules_declare_and_the_slowest_for_the_others():
    def module(period):
        return SimpleNamespace(monitor_period_s=period)

    assert refresh_wait_s([]) == DOM_REFRESH_WAIT_S
    assert refresh_wait_s([module(0.01), module(0.02)]) == 0.02
    assert refresh_wait_s([module(0.01), module(None)]) == DOM_REFRESH_WAIT_S  # one undeclared: the slowest
    assert refresh_wait_s([module(0.25)]) == 0.25  # slower than assumed: waited for all the same


def test_a_declared_period_reaches_the_module_and_its_simulator_and_a_bad_one_is_refused(tmp_path):
    from instruments.config import load_config, open_bench
    from instruments.errors import BenchConfigError

    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x2", "heater_driver": {"address": "sim"},
           "laser": {"address": "sim"}, "power_meter": {"address": "sim"},
           "transceivers": [{"name": "m0", "spec": "sff8636", "address": "sim", "tx_ports": [0],
                             "rx_ports": [3], "monitor_period_s": FAST_MODULE_PERIOD_S}]}
    with open_bench(cfg) as bench:
        assert bench.transceivers["m0"].monitor_period_s == FAST_MODULE_PERIOD_S
        assert bench.sim.transceivers.transceivers["m0"].monitor_period_s == FAST_MODULE_PERIOD_S
        assert LightMeter(bench).refresh_s == FAST_MODULE_PERIOD_S
        (tmp_path / "client.toml").write_text(bench.sim.client_config("hex:1x2"))
        client = load_config(tmp_path / "client.toml")
        assert client["transceivers"][0]["monitor_period_s"] == FAST_MODULE_PERIOD_S
    for bad in (0, -0.01, 5.0, "10ms", True):
        cfg["transceivers"][0]["monitor_period_s"] = bad
        with pytest.raises(BenchConfigError, match="monitor_period_s must be a number of seconds"):
            load_config(cfg)


class LaggingWorld:
    """Links ``k``: transmitter ``t<k>`` lights receiver ``r<k>`` with ``OWN_MW`` and receiver
    ``r<k+1>`` with ``STRAY_MW``. A receiver reports the transmitters as its last monitor
    sample saw them: as they were ``DOM_REFRESH_WAIT_S`` ago, on this world's own clock.
    """

    OWN_MW, STRAY_MW = 1.0, 0.2

    def __init__(self, n_links):
        self.now = 0.0
        self.slept = 0.0
        self.history = {k: [(-math.inf, False)] for k in range(n_links)}  # (since, disabled)
        self.modules = {}
        for k in range(n_links):
            self.modules[f"t{k}"] = self.modules[f"r{k}"] = LaggingModule(self, k)

    def sleep(self, seconds):
        self.now += seconds
        self.slept += seconds

    def lit_in_sample(self, k):
        seen = self.now - DOM_REFRESH_WAIT_S + 1e-9
        return not [d for since, d in self.history[k] if since <= seen][-1]

    def bench(self):
        n = len(self.history)
        ports = {f"t{k}": {"tx_ports": [k], "rx_ports": []} for k in range(n)}
        ports |= {f"r{k}": {"tx_ports": [], "rx_ports": [n + k]} for k in range(n)}
        return SimpleNamespace(mesh=hexagonal(1, 3), transceivers=self.modules, transceiver_ports=ports,
                               clock=lambda: self.now, sleep=self.sleep)


class LaggingModule:
    """Module ``k`` of a :class:`LaggingWorld`: its transmitter ``t<k>`` or its receiver ``r<k>``."""

    def __init__(self, world, k):
        self.world, self.k = world, k

    def tx_power_dbm(self):
        return np.array([1.0])

    def tx_disabled(self):
        return np.array([self.world.history[self.k][-1][1]])

    def set_tx_disable(self, lane, disabled):
        self.world.history[self.k].append((self.world.now, disabled))

    def rx_power_dbm(self):
        w, k = self.world, self.k
        mw = 1e-6 + w.OWN_MW * w.lit_in_sample(k) + (w.STRAY_MW * w.lit_in_sample(k - 1) if k else 0.0)
        return np.array([10 * math.log10(mw)])


def test_new_links_are_confirmed_one_monitor_refresh_each_with_the_others_lit():
    """Each dark read sees its own lane off and the link before it lit again, and k links wait
    k + 1 refreshes: one lane is enabled as the next is disabled (they waited 2k)."""
    n = 4
    world = LaggingWorld(n)
    probes = [Probe(k, n + k, -2.0, 0.0) for k in range(n)]
    readings = LightMeter(world.bench()).measure(probes, identify=range(n))
    for k, r in enumerate(readings):
        assert r.meter == TRANSCEIVERS
        assert r.measured_dbm == pytest.approx(10 * math.log10(world.OWN_MW), abs=0.01), k
        stray = world.STRAY_MW if k else 0.0  # the link before it was lit again for this dark read
        assert r.dark_dbm == pytest.approx(10 * math.log10(1e-6 + stray), abs=0.01), k
    assert world.slept == pytest.approx((n + 1) * DOM_REFRESH_WAIT_S)
    assert all(not history[-1][1] for history in world.history.values())  # every lane enabled again
    assert all(world.lit_in_sample(k) for k in range(n))  # and lit in the monitors when measure returns


def test_two_links_from_one_lane_take_it_in_turn():
    world = LaggingWorld(2)
    probes = [Probe(0, 2, -2.0, 0.0), Probe(0, 2, -2.0, 0.0)]
    readings = LightMeter(world.bench()).measure(probes, identify=[0, 1])
    assert [r.measured_dbm for r in readings] == pytest.approx([0.0, 0.0], abs=0.01)
    assert not world.history[0][-1][1]


class _Meter:
    """A bench laser and power meter over a fixed leak matrix: ``light[src][dst]`` in dBm."""

    def __init__(self, light):
        self.light, self.src = light, None
        self.laser_power_dbm = 0.0
        self.laser = self.meter = object()

    def select_input(self, port, wavelength_nm):
        self.src = port

    def read_powers_dbm(self, ports):
        return np.array([self.light[self.src].get(p, -90.0) for p in ports])


def test_a_power_meter_reading_carries_the_other_links_light_into_its_receiver():
    """The audit of session 37: a TBU two ring links share after a failover, partly off, puts
    each link's light into the other's receiver while both receive within 3 dB of plan; the
    power meter read one link at a time and never looked. Now each link's reading carries the
    other sources' leaks into its receiver, summed (a source's own other branches not counted)."""
    mesh = hexagonal(1, 2)
    light = {0: {3: -6.7, 5: -7.7, 7: -40.0}, 1: {5: -4.3, 3: -13.3, 7: -50.0},
             2: {7: -3.0, 9: -6.0, 3: -9.0}}
    meter = _Meter(light)
    bench = SimpleNamespace(mesh=mesh, transceivers={}, transceiver_ports={}, laser=meter.laser,
                            meter=meter.meter, laser_power_dbm=0.0, switch_outputs={0: 1, 1: 2, 2: 3},
                            meter_channels={3: (1, 1), 5: (1, 2), 7: (1, 3), 9: (1, 4)},
                            select_input=meter.select_input, read_powers_dbm=meter.read_powers_dbm)
    probes = [Probe(0, 3, -6.5, 0.0), Probe(1, 5, -4.0, 0.0), Probe(2, 7, -3.0, 0.0), Probe(2, 9, -6.0, 0.0)]
    readings = LightMeter(bench).measure(probes)
    assert [r.measured_dbm for r in readings] == [-6.7, -4.3, -3.0, -6.0]
    mw = lambda *dbm: 10 * math.log10(sum(10 ** (x / 10) for x in dbm))  # noqa: E731
    assert readings[0].dark_dbm == pytest.approx(mw(-13.3, -9.0))  # sources 1 and 2 into port 3
    assert readings[1].dark_dbm == pytest.approx(mw(-7.7, -90.0))  # source 0 into port 5 (2: dark)
    assert readings[2].dark_dbm == pytest.approx(mw(-40.0, -50.0))  # not source 2's branch to port 9
    assert readings[3].dark_dbm == pytest.approx(mw(-90.0, -90.0))  # nor its branch to port 7


def test_a_dark_laser_is_named_and_one_dark_source_is_judged_as_read():
    """Audit of session 38: the power meter's readings are put down to a dark laser (not measured,
    named) when it says its output is off or when two or more sources all read no light; one
    source alone reading nothing may be a dead TBU at its port, so it stays measured (judged off)."""
    mesh = hexagonal(1, 2)
    meter = _Meter({0: {}, 1: {}})  # every head reads -90 dBm
    bench = SimpleNamespace(mesh=mesh, transceivers={}, transceiver_ports={}, laser=SimpleNamespace(),
                            meter=meter.meter, laser_power_dbm=0.0, switch_outputs={0: 1, 1: 2},
                            meter_channels={3: (1, 1), 5: (1, 2)},
                            select_input=meter.select_input, read_powers_dbm=meter.read_powers_dbm)
    one = LightMeter(bench).measure([Probe(0, 3, -6.5, 0.0)])
    assert one[0].meter == "power meter"
    assert one[0].measured_dbm == -90.0
    two = LightMeter(bench).measure([Probe(0, 3, -6.5, 0.0), Probe(1, 5, -4.0, 0.0)])
    assert [r.meter for r in two] == [None, None]
    assert all("the source is dark" in r.reason for r in two)
    bench.laser.output_enabled = False
    off = LightMeter(bench).measure([Probe(0, 3, -6.5, 0.0)])
    assert off[0].meter is None
    assert "reports its output off" in off[0].reason

"""The link monitor against the simulated bench, over its real transports (ptys + ASCII I2C bridges).

A ring runs on the simulated chip (heaters set by the test-only truth map); every
accelerator has its own simulated module, read by our TransceiverModule driver through a
serial I2C bridge on a pseudo-terminal, exactly as `lumion bench` exposes them.
"""

import time

import pytest

from instruments.config import open_transceiver
from instruments.link_monitor import (
    DEBOUNCE_POLLS,
    DEFAULT_DARK_DBM,
    LinkMonitor,
    LinkMonitorError,
    WatchedLink,
    links_from_plan,
)
from instruments.sim.bench import SimulatedBench, fabric_transceivers
from instruments.sim.truth_map import TruthMap
from photonics.fabric import Accelerator, default_fabric, links_job, make_fabric, place_job, ring_job
from photonics.topology import smartlight


def _bench(fabric, plan, bridges=True):
    mesh = fabric.mesh
    specs = [{**s, "tx_ports": [mesh.port_index(p) for p in s["tx_ports"]],
              "rx_ports": [mesh.port_index(p) for p in s["rx_ports"]]} for s in fabric_transceivers(fabric)]
    sim = SimulatedBench(mesh, 0, transceivers=specs, bridges=bridges)
    sim.chip.set_currents(TruthMap(sim.chip).currents_for(plan.configuration, 24.0))
    return sim, specs


def _open(sim, specs):
    addresses = sim.addresses()["transceivers"]
    return {s["name"]: open_transceiver({"name": s["name"], "address": addresses[s["name"]]}) for s in specs}


class Rig:
    def __init__(self, fabric, job):
        self.fabric = fabric
        self.plan = place_job(fabric, job)
        self.sim, self.specs = _bench(fabric, self.plan)
        self.modules = _open(self.sim, self.specs)
        dicts = [lk.to_dict(fabric.mesh) for lk in self.plan.links]
        self.links = links_from_plan(dicts, fabric.mesh.port_index)
        self.watch()

    def watch(self):
        """A new monitor watching the plan's links (nothing seen yet)."""
        self.monitor = LinkMonitor(self.modules, {s["name"]: s["rx_ports"] for s in self.specs})
        self.monitor.watch(self.links)

    def close(self):
        for m in self.modules.values():
            m.close()
        self.sim.close()


def _ring():
    return Rig(default_fabric(), ring_job([f"gpu{k}" for k in range(8)]))


@pytest.fixture(scope="module")
def shared_ring():
    rig = _ring()
    yield rig
    rig.close()


@pytest.fixture
def ring(shared_ring):
    """The module's ring (its simulators, ptys and opened modules: 0.3-0.6 s to set up, issue 29)
    with every fault a test injected undone and a new monitor."""
    shared_ring.sim.clear_faults()
    shared_ring.watch()
    return shared_ring


@pytest.fixture
def own_ring():
    """A ring of the test's own, for a test that breaks what cannot be undone (a bridge)."""
    rig = _ring()
    yield rig
    rig.close()


def test_healthy_ring_every_link_lit_and_nothing_declared(ring):
    poll = ring.monitor.poll()
    assert set(poll.links) == {f"gpu{k}->gpu{(k + 1) % 8}" for k in range(8)}
    for name, link in poll.links.items():
        assert link["dark"] is False, name
        assert link["los"] is False
        # the default fabric keeps >= 6 dB of budget margin on every ring link (facets and
        # access waveguides included), and the simulated modules launch 1 dB over the budget's
        assert link["rx_dbm"] > DEFAULT_DARK_DBM + 6
        assert link["armed"]
    assert poll.declared == ()
    assert poll.dark_links == ()
    spares = [r for r in poll.readings if r.module in ("spare0", "spare1")]
    assert spares
    assert all(r.los for r in spares)  # idle spares receive no light: read, but not watched


def test_killed_transmitter_is_declared_after_debounce_with_measured_detect(ring):
    ring.monitor.poll()  # light seen: links armed
    kill = ring.sim.kill_transmitter("gpu2")
    assert kill["ports"] == ["port:9"]
    for _ in range(DEBOUNCE_POLLS - 1):
        poll = ring.monitor.poll()
        assert poll.declared == ()
        assert poll.links["gpu2->gpu3"]["dark"] is True
    poll = ring.monitor.poll()
    (d,) = poll.declared
    true_ms = (d.declared_s - kill["t_s"]) * 1e3
    assert d.accelerator == "gpu2"
    assert d.links == ("gpu2->gpu3",)
    assert d.rx_ports == (ring.fabric.accelerator("gpu3").rx[0],)
    assert d.polls == DEBOUNCE_POLLS
    assert d.detect_min_ms <= true_ms <= d.detect_ms  # the bounds bracket the true kill-to-declaration time
    assert all(not v["dark"] for k, v in poll.links.items() if k != "gpu2->gpu3")
    assert ring.monitor.poll().declared == ()  # declared once per dark spell


def test_one_dark_poll_is_not_a_failure(ring):
    ring.monitor.poll()
    for _ in range(3):
        ring.sim.kill_transmitter("port:9")
        assert ring.monitor.poll().links["gpu2->gpu3"]["dark"]
        ring.sim.revive_transmitter("gpu2:0")
        poll = ring.monitor.poll()
        assert not poll.links["gpu2->gpu3"]["dark"]
        assert poll.declared == ()


def test_reads_during_a_reconfiguration_are_no_evidence(ring):
    ring.monitor.poll()
    ring.sim.kill_transmitter("gpu2")
    for _ in range(DEBOUNCE_POLLS + 2):
        poll = ring.monitor.poll(confirm=lambda: False)
        assert not poll.conclusive
        assert poll.declared == ()
        assert poll.links["gpu2->gpu3"]["dark_polls"] == 0
    polls = [ring.monitor.poll(confirm=lambda: True) for _ in range(DEBOUNCE_POLLS)]
    declared = [d.accelerator for p in polls for d in p.declared]
    assert declared == ["gpu2"]


def test_a_link_placed_again_is_a_new_link(ring):
    ring.monitor.poll()
    again = [WatchedLink(lk.transmitter, lk.receiver, lk.tx_port, lk.rx_port, lk.dark_dbm, "job-2:")
             for lk in ring.links]
    ring.monitor.watch(again)
    ring.sim.kill_transmitter("gpu2")
    for _ in range(DEBOUNCE_POLLS + 1):
        poll = ring.monitor.poll()
        assert poll.declared == ()
        assert poll.links["gpu2->gpu3"]["armed"] is False  # never seen lit in this placement


def test_revived_then_killed_again_is_declared_again(ring):
    ring.monitor.poll()
    ring.sim.kill_transmitter("gpu5")
    declared = [d.accelerator for _ in range(DEBOUNCE_POLLS) for d in ring.monitor.poll().declared]
    assert declared == ["gpu5"]
    ring.sim.revive_transmitter("gpu5")
    assert ring.monitor.poll().links["gpu5->gpu6"]["dark"] is False
    ring.sim.kill_transmitter("gpu5")
    declared = [d.accelerator for _ in range(DEBOUNCE_POLLS) for d in ring.monitor.poll().declared]
    assert declared == ["gpu5"]


def test_link_never_lit_is_not_declared_but_reported_after_grace(ring):
    now = [0.0]
    mon = LinkMonitor(ring.modules, {s["name"]: s["rx_ports"] for s in ring.specs}, clock=lambda: now[0],
                      arm_grace_s=1.0)
    ring.sim.kill_transmitter("gpu0")  # dark before the monitor ever saw it lit (a link still coming up)
    mon.watch(ring.links)
    for _ in range(DEBOUNCE_POLLS + 2):
        now[0] += 0.1
        poll = mon.poll()
        assert poll.declared == ()
        assert poll.links["gpu0->gpu1"]["armed"] is False
    now[0] += 1.0
    assert mon.poll().never_lit == ("gpu0->gpu1",)
    assert mon.poll().never_lit == ()  # reported once


def test_unreadable_module_gives_no_verdict(own_ring):
    ring = own_ring
    ring.monitor.poll()
    ring.sim.kill_transmitter("gpu2")
    ring.sim.bridges["gpu3"].close()  # the receiving module's bridge disappears
    for _ in range(DEBOUNCE_POLLS + 1):
        poll = ring.monitor.poll()
        assert poll.declared == ()
        assert poll.links["gpu2->gpu3"]["dark"] is None
    (reading,) = [r for r in poll.readings if r.module == "gpu3"]
    assert reading.error
    assert reading.rx_dbm is None
    assert reading.los is None


def test_watching_a_port_no_module_receives_is_refused(ring):
    with pytest.raises(LinkMonitorError, match="no transceiver lane receives mesh port 3"):
        ring.monitor.watch([WatchedLink("gpu0", "x", 1, 3)])
    assert len(ring.monitor.watched) == 8  # nothing half-applied


def test_unknown_module_and_bad_debounce_are_refused(ring):
    with pytest.raises(LinkMonitorError, match="not opened: nope"):
        LinkMonitor(ring.modules, {"nope": [0]})
    with pytest.raises(LinkMonitorError, match="at least 1"):
        LinkMonitor(ring.modules, {}, debounce_polls=0)


def test_one_dark_link_of_a_transmitter_with_lit_links_is_a_route_fault():
    accs = [Accelerator("a", (1, 5), (0, 4)), Accelerator("b", (9, 13), (8, 12)),
            Accelerator("c", (29, 33), (28, 32))]
    fabric = make_fabric(smartlight(), accs, mesh_spec="smartlight")
    rig = Rig(fabric, links_job([["a", "b"], ["a", "c"], ["b", "a"]]))
    try:
        rig.monitor.poll()
        others = {t for lk in rig.plan.links[1:] for t in lk.route.tbus}
        only_ab = [t for t in rig.plan.links[0].route.tbus if t not in others]
        rig.sim.chip.fail_tbu(only_ab[0], "dead")  # a->b's route breaks; a still reaches c
        polls = [rig.monitor.poll() for _ in range(DEBOUNCE_POLLS + 1)]
        assert all(p.declared == () for p in polls)
        assert [p.dark_links for p in polls if p.dark_links] == [("a->b",)]
        rig.sim.chip.repair_all()
        rig.sim.kill_transmitter("a")  # both of a's lanes stop: now a is dark
        declared = [d for _ in range(DEBOUNCE_POLLS) for d in rig.monitor.poll().declared]
        assert [(d.accelerator, d.links) for d in declared] == [("a", ("a->b", "a->c"))]
    finally:
        rig.close()


def test_poll_reads_every_module_over_the_bridges(ring):
    t0 = time.monotonic()
    poll = ring.monitor.poll()
    assert {r.module for r in poll.readings} == set(default_fabric().names)
    assert all(r.error is None for r in poll.readings)
    assert all(t0 <= r.t_s <= r.t_end_s for r in poll.readings)


def test_kill_transmitter_names(ring):
    assert ring.sim.kill_transmitter(5)["lanes"] == ["gpu1:0"]
    assert ring.sim.revive_transmitter("port:5")["lanes"] == ["gpu1:0"]
    with pytest.raises(ValueError, match="unknown transmitter 'gpu9'"):
        ring.sim.kill_transmitter("gpu9")
    with pytest.raises(ValueError, match="no simulated transceiver transmits into port:0"):
        ring.sim.kill_transmitter("port:0")
    with pytest.raises(ValueError, match="not a lane"):
        ring.sim.kill_transmitter("gpu1:7")


def test_fabric_transceivers_one_module_per_accelerator():
    fabric = default_fabric()
    specs = fabric_transceivers(fabric)
    assert [s["name"] for s in specs] == list(fabric.names)
    gpu0 = specs[0]
    assert gpu0 == {"name": "gpu0", "spec": "sff8636", "address": "sim", "tx_ports": ["port:1"],
                    "rx_ports": ["port:0"]}
    wide = make_fabric(smartlight(), [Accelerator("w", tuple(range(1, 11, 2)), tuple(range(0, 10, 2))),
                                      Accelerator("x", tuple(range(11, 29, 2)), tuple(range(12, 30, 2)))])
    with pytest.raises(ValueError, match="x has 9 lanes"):
        fabric_transceivers(wide)
    five = make_fabric(smartlight(), [Accelerator("w", tuple(range(1, 11, 2)), tuple(range(0, 10, 2)))])
    assert fabric_transceivers(five)[0]["spec"] == "cmis"  # 5 lanes: a QSFP-DD


def test_cmis_modules_are_read_too():
    with SimulatedBench(smartlight(), 1) as sim:  # default bench: qsfp0 (SFF-8636) and qsfp1 (CMIS)
        addresses = sim.addresses()["transceivers"]
        specs = sim.transceiver_specs
        modules = {s["name"]: open_transceiver({"name": s["name"], "address": addresses[s["name"]]})
                   for s in specs}
        try:
            assert modules["qsfp1"].map.NAME != modules["qsfp0"].map.NAME
            mon = LinkMonitor(modules, {s["name"]: s["rx_ports"] for s in specs})
            readings = mon.read()
            lanes = [(m, k) for m in ("qsfp0", "qsfp1") for k in range(4)]
            assert [(r.module, r.lane) for r in readings] == lanes
            assert all(r.error is None for r in readings)
            assert all(r.rx_dbm is not None for r in readings)
            mon.close()
        finally:
            for m in modules.values():
                m.close()

"""What ``verify="last"`` cannot see, and the default of ``lumion program`` does (issue 27).

A vector setting (``IVEC``, or a binary frame of several words) is confirmed by reading
back in its own exchange either its last channel (``verify="last"``) or every channel
(``"all"``, what ``lumion program`` uses unless told ``--verify last``). A module whose
channel inside a vector does not take its value -- a byte lost mid-frame, a channel's DAC
that missed the update -- answers ``OK`` and a correct last channel: only a read-back of
every channel shows it.
"""

import numpy as np
import pytest

from instruments.heater_driver import HeaterDriver
from instruments.sim.heater_device import HeaterDeviceSim, register, unregister
from lab_scripts.cmd_program import DEFAULT_VERIFY
from photonics.routing import route_many

# Binary settings are 1/65535 of 24 mA apart; the values below differ by whole mA.
SAME_MA = 1e-3


@pytest.fixture
def mid_frame_miss(monkeypatch):
    """Every simulated module keeps the old current of the second channel of a vector of 3 or more.

    Returns the list of modules that missed a value (so a test can look at their chip).
    """
    missed = []
    real = HeaterDeviceSim._set_run

    def set_run(self, what, first, values, whole_chain=False):
        if what == "I" and len(values) >= 3:
            values = list(values)
            values[1] = float(self.currents()[first + 1])  # the channel did not take its value
            missed.append(self)
        return real(self, what, first, values, whole_chain)

    monkeypatch.setattr(HeaterDeviceSim, "_set_run", set_run)
    return missed


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "ascii"])
def test_verify_last_believes_a_vector_whose_middle_channel_did_not_take_it(small_chip, mid_frame_miss,
                                                                             binary):
    dev = HeaterDeviceSim(small_chip)
    url = register(f"blind-spot-{binary}", dev)
    try:
        drv = HeaterDriver.open(url, timeout_s=0.2, binary=binary, verify="last")
        target = np.array([1.0, 2.0, 3.0, 4.0])
        drv.set_block(0, target)  # returns: OK and the last channel read back right
        assert mid_frame_miss
        np.testing.assert_allclose(drv.known_currents_ma[:4], target, atol=SAME_MA)  # what it believes
        assert abs(dev.currents()[1] - 2.0) > 1.0  # what the chip holds: channel 1 never moved
        drv.close()
    finally:
        unregister(f"blind-spot-{binary}")


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "ascii"])
def test_verify_all_refuses_that_vector(small_chip, mid_frame_miss, binary):
    from instruments.errors import InstrumentError

    dev = HeaterDeviceSim(small_chip)
    url = register(f"seen-{binary}", dev)
    try:
        drv = HeaterDriver.open(url, timeout_s=0.2, binary=binary, verify="all", retries=0)
        with pytest.raises(InstrumentError, match="channel 1 reads"):
            drv.set_block(0, [1.0, 2.0, 3.0, 4.0])
        drv.close()
    finally:
        unregister(f"seen-{binary}")


def sim_bench(verify):
    """The simulated bench as ``lumion program --bench sim`` opens it, programming through a map
    whose currents are on every channel (so writes go out as vectors)."""
    from instruments.config import load_config, open_bench
    from instruments.sim.truth_map import TruthMap

    bench = open_bench(load_config(None), seed=0, verify=verify)
    bench.controller.heater_map = TruthMap(bench.sim.chip)
    conf = route_many(bench.mesh, [(5, 28), (12, 33), (20, 2)], check_budget=False).configuration
    return bench, conf


def test_the_default_of_lumion_program_refuses_the_write_and_keeps_the_old_configuration(mid_frame_miss):
    from photonics.errors import LumionError

    assert DEFAULT_VERIFY == "all"  # what `lumion program` passes to open_bench unless --verify last
    bench, conf = sim_bench(DEFAULT_VERIFY)
    with bench:
        before = bench.sim.chip.currents_ma.copy()
        with pytest.raises(LumionError, match="not confirmed"):
            bench.program(conf)
        assert mid_frame_miss  # the module did miss values inside vectors
        np.testing.assert_allclose(bench.sim.chip.currents_ma, before, atol=SAME_MA)  # rolled back
        np.testing.assert_allclose(bench.controller.currents, before, atol=SAME_MA)  # and believed so


def test_verify_last_reports_success_on_a_chip_that_differs_from_what_it_believes(mid_frame_miss):
    """The documented blind spot, through the bench: the write returns, the belief is wrong."""
    bench, conf = sim_bench("last")
    with bench:
        bench.program(conf)
        off = np.flatnonzero(np.abs(bench.sim.chip.currents_ma - bench.controller.currents) > SAME_MA)
        assert off.size > 0  # channels believed written that hold their old current

"""The in-process simulated bench runs on simulated time: a seed gives the same map under any load.

Before, the chip lived on the wall clock (plus what the bench advanced), so how long the
machine took between two readings moved the heaters' settling and the chip's drift: the same
seed gave a clean map on one run and a different one on the next (issue 26, item 7).
"""

import subprocess
import sys
import time

import numpy as np
import pytest

from calibration.digest import map_digest
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.scpi_devices import SimLaser, SimPowerMeter
from photonics.topology import hexagonal

MESH = hexagonal(1, 2)  # the smallest mesh with neighbours (crosstalk stage): ~5 s a calibration
SEED = 11
# Every this many readings the loaded run stalls for STALL_S of wall time: far longer than
# the chip's slow thermal time constant (2 ms), so on the wall clock the heaters would be
# settled where the quiet run still saw them move, and the chip's temperature would wander.
STALL_EVERY = 40
STALL_S = 0.01
BURN = "while True: pass"  # a CPU-bound process competing for the cores


def _calibrate(bench: DirectBench) -> str:
    return map_digest(calibrate(bench, Options(), progress=Progress(stream=None)).cmap)


def _stalling(bench: DirectBench) -> DirectBench:
    """``bench`` whose readings sometimes stall (a loaded machine, a descheduled thread)."""
    read = bench.read_powers_dbm

    def slow_read(ports):
        if bench.operations % STALL_EVERY == 0:
            time.sleep(STALL_S)
        return read(ports)

    bench.read_powers_dbm = slow_read
    return bench


@pytest.mark.slow  # two calibrations beside a CPU burner
def test_same_seed_same_map_under_load():
    quiet = _calibrate(DirectBench(Chip(MESH, seed=SEED)))
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        loaded = _calibrate(_stalling(DirectBench(Chip(MESH, seed=SEED))))
    finally:
        burner.kill()
        burner.wait()
    assert loaded == quiet


def test_chip_time_moves_only_with_the_bench():
    chip = Chip(MESH, seed=SEED)
    bench = DirectBench(chip)
    assert chip.simulated_time
    time.sleep(0.01)
    assert chip.now_s() == 0.0  # the wall clock moved, the chip's did not
    bench.select_input(0)
    bench.read_powers_dbm([1])
    bench.wait(0.25)
    assert chip.now_s() == bench.read_time_s + 0.25


def test_a_heater_step_settles_with_waits_not_with_the_wall_clock():
    chip = Chip(MESH, seed=SEED)
    bench = DirectBench(chip)
    before = chip.heater_state().phi_top[0]
    bench.set_currents(np.r_[2.0, np.zeros(MESH.n_heaters - 1)])  # ~0.7 pi on heater 0
    time.sleep(0.03)  # many slow time constants of wall time: the heater has not moved
    assert abs(chip.heater_state().phi_top[0] - before) < 1e-9
    bench.wait(0.03)
    assert chip.heater_state().phi_top[0] - before > 1.0


def test_a_chip_served_over_a_wire_follows_the_wall_clock_without_a_jump():
    chip = Chip(MESH, seed=SEED)
    chip.advance(2.0)
    SimPowerMeter(chip, SimLaser(), {(1, 1): 0}, {1: 0})  # a simulator whose clients sleep
    assert not chip.simulated_time
    t = chip.now_s()
    assert 2.0 <= t < 3.0  # continuous: the advances so far are kept, nothing jumps
    time.sleep(0.01)
    assert chip.now_s() >= t + 0.01

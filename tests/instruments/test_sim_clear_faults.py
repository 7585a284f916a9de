"""Undoing injected faults on a simulator shared by several test cases (issue 29).

The control-plane tests share one simulated rack per module and start each case from the
same chip: what a case injected (a killed transmitter, a pi-shifted TBU, a failed TBU or
heater) must be gone bit for bit, or the next case tests another chip.
"""

import math

import numpy as np

from instruments.sim.bench import SimulatedBench
from instruments.sim.chip import Chip
from photonics.topology import hexagonal

MESH = hexagonal(1, 2)
PORT_IN = 0
NM = 1550.0


def test_undone_phase_shifts_give_the_drawn_chip_bit_for_bit():
    chip, fresh = Chip(MESH, 3), Chip(MESH, 3)
    currents = np.linspace(0.0, 4.0, MESH.n_heaters)
    chip.set_currents(currents)
    fresh.set_currents(currents)
    chip.advance(1.0)
    fresh.advance(1.0)
    for tbu, rad in ((1, math.pi), (4, 0.3), (1, -0.1)):
        chip.shift_phase(tbu, rad)
    assert not np.array_equal(chip.output_power_mw(PORT_IN, NM), fresh.output_power_mw(PORT_IN, NM))

    chip.undo_phase_shifts()

    assert np.array_equal(chip.truth.params.offset_top, fresh.truth.params.offset_top)
    assert np.array_equal(chip.output_power_mw(PORT_IN, NM), fresh.output_power_mw(PORT_IN, NM))
    chip.undo_phase_shifts()  # nothing shifted: nothing changes
    assert np.array_equal(chip.output_power_mw(PORT_IN, NM), fresh.output_power_mw(PORT_IN, NM))


def test_clear_faults_revives_transmitters_and_repairs_the_chip():
    with SimulatedBench(MESH, 5, bridges=False) as sim:
        mods = sim.transceivers.transceivers
        first = next(iter(mods.values()))
        before = {name: m.tx_enabled().copy() for name, m in mods.items()}
        drawn = sim.chip.truth.params.offset_top
        sim.kill_transmitter(first.name)
        sim.chip.shift_phase(2, math.pi)
        sim.chip.fail_tbu(0, "dead")
        sim.chip.fail_heater(3, "open-heater")
        assert not np.array_equal(first.tx_enabled(), before[first.name])

        sim.clear_faults()

        assert {name: m.tx_enabled().tolist() for name, m in mods.items()} == {
            name: v.tolist() for name, v in before.items()}
        assert sim.chip.failed == {}
        assert sim.chip.heater_faults == {}
        assert np.array_equal(sim.chip.truth.params.offset_top, drawn)


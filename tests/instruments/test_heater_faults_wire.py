"""Issue 26 item 3 over the wire: an open or shorted heater shows in the module's read-back,
and the driver and controller report it instead of believing the setting."""

import numpy as np
import pytest

from calibration.electrical import check_heaters
from instruments.controller import InstrumentBench, MeshController
from instruments.errors import HeaterFaultError, OverCurrentError, OverVoltageError, WriteAbortedError


def test_an_open_heater_is_named_by_the_driver_not_resent_as_a_garbled_reply(url_driver, small_chip):
    small_chip.fail_heater(3, "open-heater")
    said = r"channel 3 reached its 12 V compliance on 1\.0000 mA.* is open"
    with pytest.raises(HeaterFaultError, match=said):
        url_driver.set_current(3, 1.0)
    with pytest.raises(HeaterFaultError, match=r"channel 3 .* open"):
        url_driver.set_block(2, [0.5, 0.5, 0.5])  # one vector command: all or nothing
    assert not small_chip.currents_ma.any()
    url_driver.set_current(4, 1.0)  # the others still work


def test_a_heater_too_resistive_for_a_low_compliance_stays_a_plain_over_voltage(url_driver):
    url_driver.set_max_voltage(0, 0.1)
    with pytest.raises(OverVoltageError, match="compliance") as info:
        url_driver.set_current(0, 5.0)
    assert not isinstance(info.value, HeaterFaultError)


def test_a_shorted_heater_reaches_the_current_limit_at_a_tiny_voltage(url_driver, small_chip):
    small_chip.fail_heater(5, "shorted-heater")
    with pytest.raises(OverCurrentError):
        url_driver.set_voltage(5, 0.05)  # 50 mV through ~1 Ohm: far past 24 mA


def test_the_controller_restores_and_reports_an_open_heater(url_driver, small_chip):
    ctl = MeshController(url_driver, small_chip.mesh)
    small_chip.fail_heater(7, "open-heater")
    with pytest.raises(WriteAbortedError, match="heater on channel 7 is open"):
        ctl.set_currents(np.full(small_chip.mesh.n_heaters, 0.5))
    assert not small_chip.currents_ma.any()  # nothing half-applied


def test_a_shorted_heater_passes_the_current_check_but_not_the_load_check(url_driver, small_chip):
    ctl = MeshController(url_driver, small_chip.mesh)
    small_chip.fail_heater(6, "shorted-heater")
    ctl.set_currents(np.full(small_chip.mesh.n_heaters, 1.0))  # every current confirms
    assert [(f.channel, f.kind) for f in ctl.load_faults()] == [(6, "shorted-heater")]


def test_calibrations_electrical_check_runs_over_the_wire(url_driver, small_chip):
    ctl = MeshController(url_driver, small_chip.mesh)
    bench = InstrumentBench(ctl, laser=None, meter=None, switch_outputs={}, meter_channels={},
                            chip_id=small_chip.chip_id)
    assert check_heaters(bench) == []
    small_chip.fail_heater(2, "open-heater")
    small_chip.fail_heater(9, "shorted-heater")
    faults = check_heaters(bench)
    assert [(f.channel, f.kind, f.refused) for f in faults] == [(2, "open-heater", True),
                                                                 (9, "shorted-heater", False)]
    assert not small_chip.currents_ma.any()

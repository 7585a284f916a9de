"""The driver itself refuses a setting that would take the total heater power over its limit."""

import numpy as np
import pytest

from instruments.errors import LimitError
from instruments.heater_driver import HeaterDriver
from instruments.testing import expected_protocol


def test_total_power_over_limit_sends_nothing():
    # 0.35 kOhm * (10 mA)^2 = 35 mW per channel; three channels = 105 mW > 100 mW
    script = [(b"IVEC0=10.0000,10.0000\nI1?\n", b"OK\n+10.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=4, max_total_power_mw=100.0) as drv:
        drv.set_block(0, [10.0, 10.0])
        with pytest.raises(LimitError, match=r"total heater power would reach 105\.0 mW"):
            drv.set_current(2, 10.0)
        np.testing.assert_allclose(drv.known_currents_ma, [10, 10, 0, 0])


def test_lowering_a_channel_makes_room_and_readback_resyncs():
    held = b"+10.0000 mA\n+10.0000 mA\n+0.0000 mA\n+0.0000 mA\n"
    script = [(b"IALL?\nIALL?\nID?\n", held * 2 + b"Q8iv-00A1\n"),
              (b"I0=0.0000\nI0?\n", b"OK\n+0.0000 mA\n"),
              (b"I2=10.0000\nI2?\n", b"OK\n+10.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=4, max_total_power_mw=100.0) as drv:
        drv.currents()  # another program had set two channels: the guard learns it
        with pytest.raises(LimitError):
            drv._check_total_power(2, [10.0])
        drv.set_current(0, 0.0)
        drv.set_current(2, 10.0)


def test_voltage_mode_counts_worst_case_power():
    # 12 V into a 0.2 kOhm heater is 720 mW: refused under a 500 mW limit
    with expected_protocol(HeaterDriver, [], n_channels=2, max_total_power_mw=500.0) as drv, \
            pytest.raises(LimitError, match="nothing was sent"):
        drv.set_voltage(0, 12.0)

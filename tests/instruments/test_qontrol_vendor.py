"""The vendor's own Python library (PyPI ``qontrol``) drives our simulated modules unchanged.

This is the conformance test of the simulator: ``qontrol.QXOutput`` opens the pty the
way it opens a real module (``id?``, ``nup=0``, ``nupall?``, ``vfull?``, ``ifull?``), then
sets and reads currents, one channel and all channels, in ASCII and in binary mode.
"""

import numpy as np
import pytest

qontrol = pytest.importorskip("qontrol")

from instruments.heater_driver import OFFSET_LIMIT  # noqa: E402
from instruments.sim.heater_device import HeaterDeviceSim, PtyLink  # noqa: E402
from instruments.sim.pty_oracle import oracle_serial  # noqa: E402

# The vendor's client reads until response_timeout has passed and the line has been quiet for
# inter_response_timeout (qontrol.py _issue_command_receive_response): a reply later than that
# is lost, and a command whose reply length it cannot know ('nup=0', 'nupall?', and the
# clearing read when it opens) waits the whole timeout out. Its ports here are
# instruments/sim/pty_oracle.py's: before the client looks at the line, every reply the
# simulated modules owe it has arrived, so no reply is ever late whatever the load, and the
# timeout is only the silence after the last one. (At 1 s, sized for a loaded machine
# without the oracle, each client took 3 s: 46 s for this file at load 15; issue 29.)
VENDOR_TIMEOUT_S = 0.05


@pytest.fixture
def chain(small_chip, monkeypatch):
    """Three modules of mixed types, as a lab's daisy chain may be."""
    dev = HeaterDeviceSim(small_chip, modules=["Q8iv", "Q8b", "Q8iv"])
    link = PtyLink(dev)
    monkeypatch.setattr(qontrol.serial, "Serial", oracle_serial(link))
    yield dev, link
    link.close()


@pytest.fixture(params=[False, True], ids=["ascii", "binary"])
def vendor(request, chain):
    _dev, link = chain
    q = qontrol.QXOutput(serial_port_name=link.path, binary_mode=request.param,
                         response_timeout=VENDOR_TIMEOUT_S)
    yield q
    q.close()


def test_vendor_library_connects_and_reads_the_daisy_chain(vendor):
    assert vendor.device_id == "Q8iv-00A1"
    assert [(d["device_type"], d["device_serial"], d["index"]) for d in vendor.chain] == [
        ("Q8iv", "00A1", 0), ("Q8b", "00A2", 1), ("Q8iv", "00A3", 2)]
    assert vendor.n_chs == 24
    assert (vendor.v_full, vendor.i_full) == (12.0, 24.0)


# A reading is the value plus the channel's offset plus scatter (0.3 uA / 0.4 mV RMS):
# within this many RMS, plus the 4th decimal's rounding
READ_SIGMAS = 6


def test_vendor_sets_and_reads_one_channel(vendor, small_chip, chain):
    dev, _link = chain
    step = 24.0 / 0xFFFF if vendor.binary_mode else 0.0  # the library floors binary words
    vendor.i[3] = 1.5
    assert small_chip.currents_ma[3] == pytest.approx(1.5, abs=step + 1e-9)
    scatter = READ_SIGMAS * dev.readback.current_scatter_ma + 5e-5
    assert vendor.i[3] == pytest.approx(1.5 + dev.current_offsets_ma[3], abs=step + scatter)
    assert vendor.v[3] == pytest.approx(small_chip.voltages_v()[3] + dev.voltage_offsets_v[3],
                                        abs=READ_SIGMAS * dev.readback.voltage_scatter_v + 5e-5)


def test_vendor_sets_and_gets_all_values(vendor, small_chip, chain):
    n = small_chip.mesh.n_heaters
    values = [0.1 * k for k in range(vendor.n_chs)]
    vendor.set_all_values("I", list(values))  # binary mode turns the list into words in place
    got = vendor.get_all_values("I")
    assert len(got) == vendor.n_chs
    np.testing.assert_allclose(small_chip.currents_ma, values[:n], atol=83.4 / 0xFFFF)
    dev, _link = chain
    scatter = READ_SIGMAS * dev.readback.current_scatter_ma + 5e-5
    # get_all_values drops a reading's sign (its regex '(?:\+|-|)([\d\.]+)' keeps the sign
    # out of the group): a channel at 0 with a negative offset comes back positive
    np.testing.assert_allclose(got, np.abs(np.add(values, dev.current_offsets_ma)),
                               atol=83.4 / 0xFFFF + scatter)


def test_vendor_over_limit_write_is_refused_with_the_vendor_code(vendor, small_chip):
    vendor.imax[4] = 2.0
    vendor.i[4] = 3.0
    errors = [e for e in vendor.log if e["type"] == "err"]
    assert [(e["id"], e["ch"]) for e in errors] == [(2, 4)]  # E02: over-current on channel 4
    assert "Over-current" in errors[0]["desc"]
    assert small_chip.currents_ma[4] == 0.0


def test_vendor_sees_bad_channels_and_unknown_commands(vendor):
    # target_errors: the client returns as soon as the error comes, not after its timeout
    with pytest.raises(RuntimeError, match="error code 12"):
        vendor.issue_command("i", ch=99, operator="?", n_lines_requested=1, target_errors=[12])
    with pytest.raises(RuntimeError, match="error code 10"):
        vendor.issue_command("frobnicate", operator="?", n_lines_requested=1, target_errors=[10])
    codes = [e["id"] for e in vendor.log if e["type"] == "err"]
    assert codes == [12, 10]


def test_vendor_and_our_driver_agree_on_the_same_module(chain, small_chip):
    from instruments.heater_driver import HeaterDriver

    _dev, link = chain
    q = qontrol.QXOutput(serial_port_name=link.path, response_timeout=VENDOR_TIMEOUT_S)
    q.set_all_values("I", [0.25] * q.n_chs)
    q.close()
    ours = HeaterDriver.open(link.path, timeout_s=0.5)
    # a fresh driver knows no offset yet: each channel within a module's offset of 0.25
    np.testing.assert_allclose(ours.currents(), 0.25, atol=OFFSET_LIMIT["mA"])
    ours.set_block(0, [1.0, 2.0])
    np.testing.assert_allclose(ours.currents()[:2], [1.0, 2.0])  # confirmed: exactly what was set
    ours.close()
    q = qontrol.QXOutput(serial_port_name=link.path, response_timeout=VENDOR_TIMEOUT_S)
    read = np.add([1.0, 2.0, 0.25], _dev.current_offsets_ma[:3])
    np.testing.assert_allclose(q.get_all_values("I")[:3], read,
                               atol=READ_SIGMAS * _dev.readback.current_scatter_ma + 5e-5)
    q.close()

"""The pty oracle (instruments/sim/pty_oracle.py): a client with a short quiet time loses no reply.

The vendor's client (``qontrol``) gives up on a reply once its timeout has passed and the
line has been quiet; the qontrol tests run it at 50 ms through the oracle. Here at 25 ms the
simulated module answers 0.15 s late (``PtyLink.turnaround_s``), six times the client's:
through the oracle every reply still arrives before the client looks. (A plain
``serial.Serial`` loses them: the client then finds no daisy chain and no channels.)
"""

import pytest

qontrol = pytest.importorskip("qontrol")

from instruments.sim.heater_device import HeaterDeviceSim, PtyLink  # noqa: E402
from instruments.sim.pty_oracle import oracle_serial  # noqa: E402

# The client's quiet time and how late each answer comes (s): six client timeouts, what the
# test is about. Every exchange waits the late answer (at 50 ms and 0.3 s the test took 2.3 s).
CLIENT_TIMEOUT_S = 0.025
SLOW_MODULE_S = 6 * CLIENT_TIMEOUT_S


@pytest.fixture
def slow_link(small_chip):
    link = PtyLink(HeaterDeviceSim(small_chip, modules=["Q8iv", "Q8b", "Q8iv"]))
    link.turnaround_s = SLOW_MODULE_S
    yield link
    link.close()


def test_a_reply_later_than_the_clients_timeout_is_not_lost(slow_link, small_chip, monkeypatch):
    monkeypatch.setattr(qontrol.serial, "Serial", oracle_serial(slow_link))
    q = qontrol.QXOutput(serial_port_name=slow_link.path, response_timeout=CLIENT_TIMEOUT_S)
    try:
        assert [d["device_type"] for d in q.chain] == ["Q8iv", "Q8b", "Q8iv"]  # 'nupall?': length unknown
        assert q.n_chs == 24
        q.i[2] = 1.25
        assert small_chip.currents_ma[2] == pytest.approx(1.25)
        assert q.i[2] == pytest.approx(1.25, abs=0.01)  # a read: its reply came 0.15 s late
    finally:
        q.close()


def test_the_oracle_counts_what_the_link_handled(slow_link):
    port = oracle_serial(slow_link)(slow_link.path, timeout=CLIENT_TIMEOUT_S)
    try:
        port.write(b"id?\n")
        assert port.in_waiting > 0  # waited for the late answer instead of saying 0
        assert port.readline().startswith(b"Q8iv")
        assert port.settled()
        assert port.taken == slow_link.bytes_sent
    finally:
        port.close()

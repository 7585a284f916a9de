"""The tunable laser driver (81600B-style in a Keysight 8164B mainframe) with its fiber switch.

The laser's mainframe also holds a 1xN fiber switch module (slot ``switch_slot``,
81595B-style ``ROUT<slot>:CHAN<ch> A,<k>``) that sends the laser into one of N fibers;
the bench config maps switch outputs to mesh ports. The exchanges (framing, confirmed
settings, restart recovery) are :class:`instruments.scpi.ScpiInstrument`'s; every command
is in docs/protocol-scpi.md.
"""

from __future__ import annotations

from typing import Any

from instruments.base import check_range
from instruments.errors import GarbledReplyError
from instruments.scpi import ScpiInstrument
from instruments.scpi_replies import parse_flag, parse_nm, parse_power_dbm
from instruments.scpi_settings import WAVELENGTH_TOLERANCE_NM, Setting, scpi_control
from instruments.transport import Transport

WAVELENGTH_NM = (1490.0, 1640.0)  # 81600B-class tunable laser of the bench
LASER_POWER_DBM = (-10.0, 13.0)
# 0.01 dB: we send 3 decimals of dBm; a read-back in W converts back to within 1e-6 dB.
POWER_TOLERANCE_DB = 0.01


def _switch_output(reply: str) -> int:
    """``A,<k>`` (the switch route query) -> k."""
    try:
        return int(reply.split(",")[1])
    except (IndexError, ValueError) as exc:
        raise GarbledReplyError(f"switch reply {reply!r}, expected A,<k>") from exc


class TunableLaser(ScpiInstrument):
    """Tunable laser source (81600B-style, slot 0) plus a fiber switch module in the same mainframe.

    Args:
        transport: VISA transport.
        source: laser slot (``SOUR<n>``), 0 for the 8164B's back-loadable laser.
        switch_slot: the switch module's slot (``ROUT<slot>:CHAN<ch>``).
        switch_channel: the switch module's channel (``ROUT<slot>:CHAN<ch>``).
        switch_outputs: number of switch outputs (1..N).
        expected_idn: see :class:`ScpiInstrument`.
        retries: see :class:`ScpiInstrument`.
        name: see :class:`ScpiInstrument`.

    After a restart the driver re-applies wavelength, power, switch output **and the output
    state** it set: an output the user switched on through this driver is switched on again.
    """

    def __init__(self, transport: Transport, *, source: int = 0, switch_slot: int = 1,
                 switch_channel: int = 1, switch_outputs: int = 64, expected_idn: str | None = None,
                 retries: int = 2, name: str = "laser") -> None:
        super().__init__(transport, expected_idn=expected_idn, name=name, retries=retries)
        self.ids = {"src": source, "sw": switch_slot, "swch": switch_channel}
        self.switch_outputs = switch_outputs

    wavelength_nm = scpi_control(
        "SOUR{src}:WAV?", "SOUR{src}:WAV {value}NM", "wavelength (nm, 1490..1640)", parse=parse_nm,
        limits=WAVELENGTH_NM, unit="nm", fmt=lambda x: f"{x:.4f}", tolerance=WAVELENGTH_TOLERANCE_NM)
    output_enabled = scpi_control(
        "SOUR{src}:POW:STAT?", "SOUR{src}:POW:STAT {value}", "laser output on (bool)", parse=parse_flag)

    def _power_queries(self) -> tuple[str, str]:
        return "SOUR{src}:POW:UNIT?".format(**self.ids), "SOUR{src}:POW?".format(**self.ids)

    @property
    def power_dbm(self) -> float:
        """Output power setting (dBm, -10..+13), read with its unit (W replies converted)."""
        unit_q, pow_q = self._power_queries()

        def accept(replies: list[str]) -> float:
            u1, u2, p1, p2 = replies
            if (u1, p1) != (u2, p2):
                raise GarbledReplyError(f"{self.name}: power read twice as {u1};{p1} and {u2};{p2}")
            return parse_power_dbm(u1, p1)
        return self._transact([unit_q, unit_q, pow_q, pow_q], 4, accept, pow_q)

    @power_dbm.setter
    def power_dbm(self, value: Any) -> None:
        # the DBM suffix makes the setting independent of the laser's POW:UNIT
        x = float(f"{check_range(value, *LASER_POWER_DBM, 'output power', 'dBm'):.3f}")
        unit_q, pow_q = self._power_queries()
        self.apply(Setting(pow_q, "SOUR{src}:POW {x:.3f}DBM".format(x=x, **self.ids), (unit_q, pow_q),
                           lambda r: parse_power_dbm(*r), x, POWER_TOLERANCE_DB))

    def _route(self) -> str:
        return f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']}"

    def select_output(self, output: Any) -> None:
        """``ROUT<slot>:CHAN<ch> A,<k>``: send the laser to switch output ``k`` (1..N), confirmed."""
        k = int(check_range(output, 1, self.switch_outputs, "switch output", ""))
        query = f"{self._route()}?"
        self.apply(Setting(query, f"{self._route()} A,{k}", (query,), lambda r: _switch_output(r[0]), k))

    def selected_output(self) -> int:
        """``ROUT<slot>:CHAN<ch>?``: the switch output now selected."""
        return self.query_value(f"{self._route()}?", _switch_output)

"""One place to schedule byte-level faults on the links of a simulated bench.

The same fault names act on the heater driver's serial link (pty or ``lumionsim://``)
and on the laser's and the meter's TCP links (SCPI), at the byte level, so lab code can
be tested against exactly the faults our own fault campaign uses::

    def test_my_script_survives_a_dropped_link(lumion_sim_bench, lumion_faults):
        lumion_faults.heater("drop_after")          # the next command runs, its reply is lost
        my_script(lumion_sim_bench)                 # must succeed or raise, never lie

========================  ================================================================
kind                      what happens to the next command (``after`` skips commands)
========================  ================================================================
``drop_before``           the link drops before it arrives: not executed
``drop_within``           it is cut in the middle (serial: the half that arrived stays in
                          the module's buffer; SCPI: the part before its first ``;`` runs),
                          then the link drops
``drop_after``            executed, then the link drops before the reply
``delay``                 executed; the reply comes only when the next command arrives
``duplicate``             the reply comes twice
``unsolicited``           an unasked line comes before the reply
``corrupt``               one byte of the reply changes
``corrupt_command``       one byte of the command changes before the instrument parses it
``reset``                 the instrument restarts first (heater: outputs to zero and ``E90``;
                          SCPI: power-on state and the PON bit), then runs the command
``reject``                a setting is refused (heater ``E02``; SCPI ``-222``), not applied
========================  ================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

KINDS = ("drop_before", "drop_within", "drop_after", "delay", "duplicate", "unsolicited", "corrupt",
         "corrupt_command", "reset", "reject")
INSTRUMENTS = ("heater", "laser", "meter")


def take_due(pending: list[Any], skip: Callable[[Any], bool] = lambda _f: False) -> Any:
    """The fault due on this command (one of its repetitions used up), or None.

    ``pending`` holds the simulators' scheduled faults (``after``, ``count`` attributes).

    Faults wait in order; one still ``after`` commands away counts this command down.
    ``skip`` passes over faults that cannot act on this command (they keep waiting).
    """
    for fault in pending:
        if skip(fault):
            continue
        if fault.after > 0:
            fault.after -= 1
            continue
        fault.count -= 1
        if fault.count <= 0:
            pending.remove(fault)
        return fault
    return None


class FaultInjector:
    """Schedule faults on a :class:`~instruments.sim.bench.SimulatedBench`'s links.

    Args:
        sim: the simulated bench (``bench.sim`` of a bench opened on ``sim`` addresses).
    """

    def __init__(self, sim: Any) -> None:
        self.sim = sim

    def _device(self, instrument: str) -> Any:
        if instrument not in INSTRUMENTS:
            raise ValueError(f"no instrument {instrument!r}; use one of {INSTRUMENTS}")
        return {"heater": self.sim.heater, "laser": self.sim.laser, "meter": self.sim.meter}[instrument]

    def inject(self, instrument: str, kind: str, *, after: int = 0, count: int = 1) -> None:
        """Make the ``after``-th next command of ``instrument`` meet ``kind``, ``count`` times."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {KINDS}")
        self._device(instrument).inject(kind, after=after, count=count)

    def heater(self, kind: str, **kwargs: int) -> None:
        """A fault on the heater driver's serial link."""
        self.inject("heater", kind, **kwargs)

    def laser(self, kind: str, **kwargs: int) -> None:
        """A fault on the laser's TCP link."""
        self.inject("laser", kind, **kwargs)

    def meter(self, kind: str, **kwargs: int) -> None:
        """A fault on the power meter's TCP link."""
        self.inject("meter", kind, **kwargs)

    def clear(self) -> None:
        """Forget every pending fault."""
        for name in INSTRUMENTS:
            device = self._device(name)
            if hasattr(device, "clear_faults"):
                device.clear_faults()
            else:  # pragma: no cover - older SCPI simulators keep a plain list
                device.faults.clear()

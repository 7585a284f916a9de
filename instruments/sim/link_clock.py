"""The clock of a simulated heater module and of its in-process link (``lumionsim://``).

The module's firmware drops an incomplete command after ``FRAME_TIMEOUT_S`` (50 ms)
without bytes (:mod:`instruments.sim.heater_device`), so which path a cut command takes
depends on how long the driver took before its next bytes. On the wall clock
(:class:`WallClock`, the default) that is however long this machine took: after a cut
command a quick retry lands in the module's buffer behind the cut half, a retry delayed by
a busy machine finds it dropped, and a seeded fault campaign takes a different path under
load.

:class:`SimulatedClock` stands still except where the client waits: the
``lumionsim://`` port (:mod:`instruments.sim.urlhandler`) answers in the writer's own
thread, so every reply a write causes is in the port's buffer when the write returns; a
read that does not find its line there will not get it by waiting, and moves the clock on
by its whole timeout instead of sleeping it. So a reply that comes is never declared lost,
a lost one is known at once, and the module sees exactly the gaps a driver on a real line
would leave (its timeouts), on any machine under any load. The driver's code and its
timeouts are unchanged.

Only a link whose client drives the clock may use it: a device served on a pty
(:class:`~instruments.sim.pty_link.PtyLink`, its own thread and real bytes) keeps the wall
clock.
"""

from __future__ import annotations

import time


class WallClock:
    """Real time (``time.monotonic``, s): the clock of a module served over a real wire."""

    simulated = False

    def now(self) -> float:
        """Seconds on the monotonic wall clock."""
        return time.monotonic()


class SimulatedClock:
    """Time that moves only when a client of the link waits (s); starts at 0.

    Example:
        >>> clock = SimulatedClock()
        >>> clock.advance(0.15)  # a read waited out its 0.15 s timeout
        >>> clock.now()
        0.15
    """

    simulated = True

    def __init__(self) -> None:
        self._now_s = 0.0

    def now(self) -> float:
        """Seconds of waiting so far."""
        return self._now_s

    def advance(self, seconds: float) -> None:
        """Move on by ``seconds`` (>= 0): the time a client spent waiting on the link."""
        if not seconds >= 0:  # also refuses NaN
            raise ValueError(f"time only moves forward, not by {seconds} s")
        self._now_s += float(seconds)

"""Crash injection for the crash-safety tests: ``LUMION_CRASH_AT=<step>`` kills the service with SIGKILL.

Steps of a reconfiguration, in order (docs/controlplane.md, "state machine"):
``intent`` (intent committed, nothing written), ``write:K`` (after the K-th heater-driver
command of the write went out), ``written`` (every command sent, not yet verified),
``verified`` (chip read back and equal to the target, intent still open), ``committed``
(intent done, reply not yet sent). ``LUMION_CRASH_ON`` lists the reconfiguration kinds
that arm it (comma separated, default ``failover,tbu``). Unset, nothing is armed and
:func:`point` costs one attribute test.
"""

from __future__ import annotations

import os
import signal
from typing import Any

CRASH_ENV = "LUMION_CRASH_AT"
CRASH_ON_ENV = "LUMION_CRASH_ON"
STEPS = ("intent", "write", "written", "verified", "committed")


class Crasher:
    """Kill this process with SIGKILL at one step of the first armed reconfiguration."""

    def __init__(self, step: str | None, kinds: tuple[str, ...] = ("failover", "tbu")) -> None:
        self.step, self.nth = None, 0
        if step:
            name, _, n = step.partition(":")
            if name not in STEPS or (n and not n.isdigit()):
                raise ValueError(
                    f"{CRASH_ENV}={step!r}: give one of {', '.join(STEPS)} (write:K for the K-th command)"
                )
            self.step, self.nth = name, int(n or 1)
        self.kinds = kinds

    @classmethod
    def from_env(cls) -> Crasher:
        """Armed from the environment (disarmed when the variable is unset)."""
        kinds = tuple(k for k in os.environ.get(CRASH_ON_ENV, "failover,tbu").split(",") if k)
        return cls(os.environ.get(CRASH_ENV) or None, kinds)

    def point(self, step: str, kind: str) -> None:
        """Die here if armed for ``step`` of a ``kind`` reconfiguration."""
        if self.step == step and kind in self.kinds:
            os.kill(os.getpid(), signal.SIGKILL)

    def around_write(self, driver: Any, kind: str) -> Any:
        """A context that counts the driver's block writes and dies after the K-th (``write:K``)."""
        return _CountingWrites(self, driver) if self.step == "write" and kind in self.kinds else _Nothing()


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _CountingWrites:
    def __init__(self, crasher: Crasher, driver: Any) -> None:
        self.crasher, self.driver, self.count = crasher, driver, 0

    def __enter__(self) -> None:
        original = self.driver.set_block

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            self.count += 1
            if self.count >= self.crasher.nth:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        self.driver.set_block = counted  # instance attribute: only this process, only while armed

    def __exit__(self, *exc: object) -> None:
        del self.driver.set_block

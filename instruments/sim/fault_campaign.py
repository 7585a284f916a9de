"""A fault campaign: random bench work through random byte-level faults, checked after every step.

Each :class:`Step` does one thing a lab script or the calibration does -- program heater
currents, read them back, switch and tune the laser, read the power meter -- after
optionally scheduling one fault (:mod:`instruments.sim.faults`) on one instrument's link.
After every step :meth:`FaultCampaign.check` asserts what issue 13 promises:

* the mesh controller's belief equals the simulated chip's currents; where the controller
  has marked the state unknown, the check reads it back first (``resync``, as the next
  write would), counts it (:attr:`FaultCampaign.unknown_states`: ``seen``, ``resolved``)
  and then compares: an unknown state is never a reason to check nothing;
* a laser setting that returned is what the laser holds (no setting lost without an error);
* a power reading that returned is in dBm, of the light the laser really sends, at the
  wavelength the bench believes (no reading in the wrong unit or of the wrong setting).

:func:`random_steps` makes seeded step lists (the benchmark); the test draws them with
hypothesis.

Many faults end in a time-out, and none of them may depend on how busy the machine is
(docs/testing.md, "Waiting for replies that never come"). The heater module is reached
over ``lumionsim://`` on a :class:`~instruments.sim.link_clock.SimulatedClock`: its replies
are in the port's buffer when a write returns, a read that finds none moves the module's
clock on by the driver's time-out instead of sleeping, and the module's frame timeout
(a cut command dropped after 50 ms without bytes) sees those gaps and no others. The laser
and the meter answer over TCP from their server threads; their drivers read through the
reply oracle (:mod:`instruments.sim.reply_oracle`): a reply on its way gets
:data:`SCPI_LONG_S`, one that will never come is declared lost after :data:`SCPI_SHORT_S`.
So a seed takes the same path through its faults on any machine under any load.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from instruments.sim.faults import KINDS, FaultInjector
from photonics.errors import LumionError

ACTIONS = ("program", "select", "read", "resync")
# Heater currents are drawn in 0..MAX_DRAW_MA: far from every limit, so only faults refuse them.
MAX_DRAW_MA = 4.0
# A read-back within this holds the target (mA): the driver's own confirmation tolerance.
CURRENT_TOLERANCE_MA = 0.005
# A meter reading agrees with the light when within this many noise sigmas (0.5 % + floor).
READING_SIGMAS = 6.0
METER_RELATIVE_NOISE = 0.005
METER_FLOOR_MW = 1e-7  # -70 dBm
# Read-backs tried to resolve an unknown heater state: a step schedules one fault, which
# spoils at most one command (``count`` 1), so the second attempt meets none; a third is margin.
RESOLVE_ATTEMPTS = 3
# The laser's and the meter's time-outs through the reply oracle (s): a reply on its way gets
# SCPI_LONG_S, far beyond a loaded machine's stalls; one the server will never send is lost
# after SCPI_SHORT_S (the values of tests/instruments/test_scpi_faults.py).
SCPI_LONG_S = 5.0
SCPI_SHORT_S = 0.01


class CampaignViolationError(AssertionError):
    """The software believed a state that was not the real one."""


@dataclass(frozen=True)
class Step:
    """One step: an action (drawn from ``seed``), after an optional fault.

    Attributes:
        action: one of :data:`ACTIONS`.
        seed: drives the action's random values (currents, port, wavelength).
        fault: ``(instrument, kind, after)`` scheduled before the action, or None.
    """

    action: str
    seed: int
    fault: tuple[str, str, int] | None = None


def random_steps(n: int, seed: int = 0, fault_rate: float = 0.1,
                 instruments: Sequence[str] = ("heater", "laser", "meter"),
                 kinds: Sequence[str] = KINDS) -> list[Step]:
    """``n`` seeded steps, a fault before a fraction ``fault_rate`` of them."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(n):
        fault = None
        if rng.random() < fault_rate:
            instrument, kind = str(rng.choice(list(instruments))), str(rng.choice(list(kinds)))
            fault = (instrument, kind, int(rng.integers(0, 3)))
        steps.append(Step(str(rng.choice(ACTIONS)), int(rng.integers(2**31)), fault))
    return steps


def _read_through_oracle(inst: Any, server: Any) -> None:
    """Put an opened SCPI driver's link on the reply oracle of its simulated ``server``."""
    from instruments.sim.reply_oracle import oracle_opener
    from instruments.transport import VisaTransport

    old = inst.transport
    inst.transport = VisaTransport(old.address, timeout_s=SCPI_LONG_S,
                                   opener=oracle_opener(server, long_s=SCPI_LONG_S, short_s=SCPI_SHORT_S))
    old.close()


class FaultCampaign:
    """A simulated bench over the real transports, and the checks.

    Args:
        mesh: mesh spec of the simulated chip (small meshes make fast steps).
        seed: the chip's seed.
        timeout_s: the heater driver's time-out (s), waited on the module's simulated clock;
            above the module's 50 ms frame timeout, as on a real line, so a command cut by a
            fault is dropped before the driver resends it.
        heater: ``[heater_driver]`` settings (``protocol``; ``verify`` is passed to the driver).
    """

    def __init__(self, mesh: str = "hex:1x2", seed: int = 0, timeout_s: float = 0.15,
                 heater: dict[str, Any] | None = None) -> None:
        from instruments.config import open_bench
        from instruments.sim.link_clock import SimulatedClock

        heater = {"address": "sim", **(heater or {})}
        verify = heater.pop("verify", "last")
        cfg = {"schema": "lumion.bench", "version": 1, "mesh": mesh, "heater_driver": heater,
               "laser": {"address": "sim"}, "power_meter": {"address": "sim"},
               # The ideal chip: readings are checked against the light at check time, which
               # the realistic chip's thermal settling would move after a current change.
               "sim": {"seed": seed, "heater_link": "url", "chip": "ideal"}}
        self.clock = SimulatedClock()
        self.bench = open_bench(cfg, seed=seed, timeout_s=timeout_s, heater_clock=self.clock)
        self.bench.controller.driver.verify = verify
        self.sim = self.bench.sim
        try:
            for inst, server in ((self.bench.laser, self.sim.laser_server),
                                 (self.bench.meter, self.sim.meter_server)):
                _read_through_oracle(inst, server)
        except BaseException:
            self.bench.close()
            raise
        self.faults = FaultInjector(self.sim)
        self.outcomes: Counter[str] = Counter()
        # heater states the controller marked unknown after a step ("seen"), and read back ("resolved")
        self.unknown_states: Counter[str] = Counter()
        self.steps = 0
        self._selected: tuple[int, float] | None = None  # (port, nm) of the last select that returned

    def close(self) -> None:
        """Close the bench and its simulators."""
        self.bench.close()

    def __enter__(self) -> FaultCampaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------
    def run(self, steps: Iterable[Step]) -> Counter[str]:
        """Run the steps, checking after each; returns outcome counts."""
        for step in steps:
            self.step(step)
        return self.outcomes

    def step(self, step: Step) -> None:
        """One step and its check; :class:`CampaignViolationError` names the step on failure."""
        self.steps += 1
        if step.fault is not None:
            self.faults.inject(step.fault[0], step.fault[1], after=step.fault[2])
        rng = np.random.default_rng(step.seed)
        outcome, result = "ok", None
        try:
            result = getattr(self, f"_{step.action}")(rng)
        except LumionError as exc:
            outcome = type(exc).__name__
        self.outcomes[f"{step.action}:{outcome}"] += 1
        try:
            self.check(step, outcome == "ok", result)
        except CampaignViolationError as exc:
            raise CampaignViolationError(f"step {self.steps} {step}: {exc}") from None

    def _program(self, rng: np.random.Generator) -> np.ndarray:
        ctl = self.bench.controller
        target = ctl.currents
        change = rng.random(len(target)) < 0.5
        target[change] = np.round(rng.uniform(0.0, MAX_DRAW_MA, int(change.sum())), 4)
        ctl.set_currents(target)
        return target

    def _resync(self, _rng: np.random.Generator) -> None:
        self.bench.controller.resync()

    def _select(self, rng: np.random.Generator) -> tuple[int, float]:
        ports = sorted(self.bench.switch_outputs)
        port, nm = int(rng.choice(ports)), float(np.round(rng.uniform(1540.0, 1560.0), 3))
        self._selected = None
        self.bench.select_input(port, nm)
        self._selected = (port, nm)
        return port, nm

    def _read(self, rng: np.random.Generator) -> tuple[list[int], np.ndarray]:
        ports = [int(p) for p in rng.choice(sorted(self.bench.meter_channels), size=2, replace=False)]
        return ports, self.bench.read_powers_dbm(ports)

    # -- checking -----------------------------------------------------------------------
    def check(self, step: Step, ok: bool, result: Any) -> None:
        """Assert the promises of the module docstring after ``step``."""
        self._check_heaters(step, ok, result)
        if step.action == "select" and ok:
            self._check_laser(*result)
        if step.action == "read" and ok:
            self._check_readings(*result)

    def _resolve_unknown(self) -> None:
        """Read an unknown heater state back (as the next write would), counting it.

        Raises:
            CampaignViolationError: it stayed unknown after :data:`RESOLVE_ATTEMPTS` read-backs.
        """
        self.unknown_states["seen"] += 1
        failures = []
        for _ in range(RESOLVE_ATTEMPTS):
            try:
                self.bench.controller.resync()
            except LumionError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            self.unknown_states["resolved"] += 1
            return
        raise CampaignViolationError(f"the heater state stayed unknown: {RESOLVE_ATTEMPTS} read-backs "
                                     f"failed ({failures[-1]})")

    def _check_heaters(self, step: Step, ok: bool, target: Any) -> None:
        ctl, chip = self.bench.controller, self.sim.chip
        if not ctl.state_known:
            self._resolve_unknown()  # then checked like any other state
        held = chip.currents_ma
        wrong = np.flatnonzero(np.abs(ctl.currents - held) > CURRENT_TOLERANCE_MA)
        if wrong.size:
            raise CampaignViolationError(f"controller believes {ctl.currents[wrong[:4]]} mA on channels "
                                    f"{wrong[:4].tolist()}, the chip holds {held[wrong[:4]]}")
        if step.action == "program" and ok:
            off = np.flatnonzero(np.abs(held - target) > CURRENT_TOLERANCE_MA)
            if off.size:
                raise CampaignViolationError(f"program returned but channels {off[:4].tolist()} hold "
                                        f"{held[off[:4]]} not {target[off[:4]]}")

    def _check_laser(self, port: int, nm: float) -> None:
        laser = self.sim.laser
        output = self.bench.switch_outputs[port]
        if not math.isclose(laser.wavelength_nm, nm, abs_tol=1e-3) or laser.switch_output != output:
            raise CampaignViolationError(f"select_input({port}, {nm}) returned but the laser is at "
                                    f"{laser.wavelength_nm} nm, switch output {laser.switch_output}")

    def _check_readings(self, ports: list[int], dbm: np.ndarray) -> None:
        laser = self.sim.laser
        believed = getattr(self.bench, "_wavelength_nm", None)
        if believed is not None and not math.isclose(laser.wavelength_nm, believed, abs_tol=1e-3):
            raise CampaignViolationError(f"a reading returned while the bench believes {believed} nm and the "
                                    f"laser sends {laser.wavelength_nm} nm")
        for port, value in zip(ports, dbm, strict=True):
            slot, chan = self.bench.meter_channels[port]
            true_mw = self.sim.meter.true_power_mw(slot, chan)
            got_mw = 10 ** (float(value) / 10)
            sigma = METER_RELATIVE_NOISE * true_mw + METER_FLOOR_MW
            if not np.isfinite(value) or abs(got_mw - true_mw) > READING_SIGMAS * sigma + METER_FLOOR_MW:
                raise CampaignViolationError(f"port {port} read {value:.3f} dBm, the light there is "
                                        f"{10 * np.log10(max(true_mw, 1e-30)):.3f} dBm")

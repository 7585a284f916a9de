"""The recovery-time model: detect, compute, write, settle, relock and verify (docs/fabric.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from photonics.configuration import Configuration


# ---------------------------------------------------------------------------------------
# Timing model
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimingModel:
    """The recovery-time model; every number configurable, sources in docs/fabric.md.

    Attributes:
        los_assert_ms: receiver LOS assert time after light is lost (SFF-8636: <= 100 us).
        poll_interval_ms: the management loop's poll of the modules' interrupt line and
            flags (worst case: a whole interval passes before the poll).
        i2c_khz: management bus clock; a byte costs 9 clocks (8 bits + ACK).
        flag_read_bytes: bytes of one flag read (device address, register, address, flag).
        baud: heater-driver serial rate; ``bits_per_byte`` 10 for 8N1.
        protocol: the Qontrol wire mode, ``"binary"`` (7-byte frames, a module's run of
            channels as one DEXT vector) or ``"ascii"`` (``I<ch>=<mA>`` / ``IVEC<first>=...``).
        channels_per_module: a vector command addresses one module of the daisy chain.
        turnaround_ms: the module's and the USB-serial adapter's reply latency, paid once per
            exchange (instruments.heater_driver.REPLY_TURNAROUND_S). Every exchange is the
            setting plus the read-back of its last channel, answered by ``OK`` and the value
            (``+1.2500 mA``): what the heater driver really sends.
        thermal_tau_ms: time constant of a heater's first-order step response, the phase
            approaching its final value as ``1 - exp(-t / tau)`` (docs/physics.md: 10 us; 2-150 us
            depending on heater and trenches, under-etched heaters at the slow end: Liu et
            al., "Thermo-optic phase shifters based on silicon-on-insulator platform",
            Front. Optoelectron. 15:9, 2022).
        settle_fraction: a heater has settled when its phase is within this fraction of pi
            of the final value (1 %: 0.031 rad, which leaks sin^2(0.0157) = -36 dB into the
            wrong output, below the TBU's 35 dB extinction). See :meth:`settle_ms`.
        relock_ms: transceiver CDR/DSP re-lock after its light is switched (None: the
            receiving lanes' own ``relock_ms``, 5 ms by default).
        verify_bytes_per_link: I2C bytes to read one receiving module's RX power and LOS
            and LOL flags after re-lock (address, register, address, 2 power + 2 flag bytes).
    """

    los_assert_ms: float = 0.1
    poll_interval_ms: float = 1.0
    i2c_khz: float = 400.0
    flag_read_bytes: int = 4
    baud: float = 115200.0
    bits_per_byte: int = 10
    protocol: str = "binary"
    channels_per_module: int = 8
    turnaround_ms: float = 2.0
    thermal_tau_ms: float = 0.010
    settle_fraction: float = 0.01
    relock_ms: float | None = None
    verify_bytes_per_link: int = 7

    def settle_ms(self, phase_step_rad: float = np.pi) -> float:
        """Time (ms) for a heater stepped by ``phase_step_rad`` to settle (first order).

        The phase error after a step ``dphi`` decays as ``dphi exp(-t / tau)``; it is
        within ``settle_fraction * pi`` after ``tau ln(dphi / (settle_fraction pi))``
        (0 for a step already that small). The largest step a heater ever takes is pi
        (heater phases stay in [0, pi], see ``photonics.physics.split_phases``): 4.6 tau.

        Example:
            >>> round(TimingModel().settle_ms(np.pi) * 1e3, 2)  # us, for a full pi step
            46.05
        """
        tol = self.settle_fraction * np.pi
        step = abs(float(phase_step_rad))
        return self.thermal_tau_ms * float(np.log(step / tol)) if step > tol else 0.0

    def i2c_ms(self, n_bytes: int) -> float:
        """Time (ms) to move ``n_bytes`` over the management bus."""
        return n_bytes * 9 / self.i2c_khz

    def exchanges(self, program: Mapping[int, float]) -> list[list[tuple[int, float]]]:
        """The program's commands: runs of consecutive channels, split at module boundaries."""
        runs: list[list[tuple[int, float]]] = []
        for ch, v in sorted(program.items()):
            last = runs[-1][-1][0] if runs else None
            if last is not None and ch == last + 1 and ch % self.channels_per_module:
                runs[-1].append((ch, v))
            else:
                runs.append([(ch, v)])
        return runs

    def _exchange_bytes(self, run: list[tuple[int, float]]) -> int:
        first, last = run[0][0], run[-1][0]
        if self.protocol == "binary":  # header, command, 3 address bytes, 2 data (+2 count) bytes
            sent = 7 if len(run) == 1 else 7 + 2 * len(run)
            sent += 7  # the read-back frame
        else:
            values = ",".join(f"{v:.4f}" for _, v in run)
            sent = len(f"I{first}={values}\n" if len(run) == 1 else f"IVEC{first}={values}\n")
            sent += len(f"I{last}?\n")
        return sent + len("OK\n") + len(f"{run[-1][1]:+.4f} mA\n")

    def write_bytes(self, program: Mapping[int, float]) -> int:
        """Bytes on the serial line, both ways, for a heater program ({channel: value})."""
        return sum(self._exchange_bytes(run) for run in self.exchanges(program))

    def write_ms(self, program: Mapping[int, float]) -> float:
        """Time (ms) to write ``program``: its bytes at ``baud`` plus a turnaround per exchange."""
        return (self.write_bytes(program) * self.bits_per_byte / self.baud * 1e3
                + len(self.exchanges(program)) * self.turnaround_ms)


def recovery_timing(
    timing: TimingModel, compute_ms: float, program: Mapping[int, float], relock_ms: float,
    n_links: int, detect: bool = True, max_phase_step_rad: float | None = None,
) -> dict[str, float]:
    """Breakdown (ms) of one recovery; stages run one after another, so ``total`` is the sum.

    ``detect`` False models a planned switch (a phase change): nothing to detect and
    nothing computed at switch time. ``settle`` is :meth:`TimingModel.settle_ms` of the
    program's largest heater phase step ``max_phase_step_rad`` (rad; None: the worst
    case, pi, e.g. for a program in mA whose phases the timing model does not know).
    """
    stages = {
        "detect": (timing.los_assert_ms + timing.poll_interval_ms + timing.i2c_ms(timing.flag_read_bytes)
                   if detect else 0.0),
        "compute": float(compute_ms),
        "write": timing.write_ms(program),
        "settle": (timing.settle_ms(np.pi if max_phase_step_rad is None else max_phase_step_rad)
                   if program else 0.0),
        "relock": float(relock_ms) if n_links else 0.0,
        "verify": timing.i2c_ms(timing.verify_bytes_per_link) * n_links,
    }
    stages["total"] = sum(stages.values())
    return stages


def configuration_phase_step(before: Configuration, after: Configuration, channels: Iterable[int]) -> float:
    """Largest heater phase step (rad) on ``channels`` going from ``before`` to ``after``.

    Phases are the configurations' own heater phases (offset-free, each in [0, pi] on the arm
    that carries it; channel ``2i`` top arm of TBU i, ``2i + 1`` bottom): the step a heater
    really takes whatever unit its program is written in (a program in mA does not say it).
    Bar to cross is a pi step; 0 when no channel is written.
    """
    ch = np.fromiter(channels, dtype=int)
    if not ch.size:
        return 0.0
    old, new = before.heater_state(), after.heater_state()
    step_top = np.abs(new.phi_top - old.phi_top)
    step_bot = np.abs(new.phi_bot - old.phi_bot)
    steps = np.empty(2 * len(step_top))
    steps[0::2], steps[1::2] = step_top, step_bot
    return float(steps[ch].max())


def _phase_step(delta: np.ndarray, write: np.ndarray, unit: str) -> float | None:
    """Largest heater phase step (rad) of a program in rad; None (worst case) for mA."""
    if unit != "rad" or not write.size:
        return None
    return float(delta[write].max())



"""What calibration needs from a bench: the contract real and simulated benches fulfil.

A bench has a laser feeding one mesh port at a time (through a fiber switch or by hand),
a power meter whose channels sit at mesh ports, and a heater driver. Calibration talks
only to this protocol, so it runs the same on the simulated bench, in-process
(``instruments.sim.direct.DirectBench``) or over the real wire protocols
(``instruments``), and on a real chip.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from photonics.topology import Mesh


@runtime_checkable
class Bench(Protocol):
    """The operations calibration and verification use.

    Attributes:
        mesh: the chip's topology (names, channel numbering).
        chip_id: identifier a calibration map is tied to.
        max_current_ma: per-channel current limit the driver enforces (mA).
        operations: count of set-and-read operations so far (one ``set_currents`` followed
            by one ``read_powers_dbm`` is one operation; reads with no set in between count too).
    """

    mesh: Mesh
    chip_id: str
    max_current_ma: float
    operations: int

    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set all heater currents (mA, shape (n_heaters,)); only changed channels are written."""
        ...

    def currents(self) -> np.ndarray:
        """The heater currents now applied (mA)."""
        ...

    def select_input(self, port: int, wavelength_nm: float = 1550.0) -> None:
        """Send the laser into mesh port ``port`` at ``wavelength_nm``."""
        ...

    def read_powers_dbm(self, ports: Sequence[int]) -> np.ndarray:
        """Optical power (dBm) at the given mesh ports, one meter reading each."""
        ...


@dataclass(frozen=True)
class HeaterReadback:
    """What every heater channel's module reads after a setting (arrays of shape (n_heaters,)).

    Attributes:
        volts: each channel's voltage reading (V): the module's measurement, its fixed
            offset and a fresh scatter in (instruments.sim.heater_device ``Readback``).
        milliamps: each channel's current reading (mA), likewise.
        refused: channels whose module refused the setting because it reached the channel's
            voltage compliance (Qontrol ``E01``): nothing flows there at any voltage it may give.
    """

    volts: np.ndarray
    milliamps: np.ndarray
    refused: np.ndarray


@runtime_checkable
class ElectricalBench(Protocol):
    """A bench whose heater driver reads each channel's voltage and current back (optional)."""

    def heater_readback(self, currents_ma: np.ndarray) -> HeaterReadback:
        """Set every heater current (mA) and read every channel's voltage and current back."""
        ...


def settle(bench: Bench, seconds: float) -> None:
    """Let the heaters settle for ``seconds`` after a current change.

    A bench that keeps its own clock (the in-process simulator) offers ``wait``; a real bench
    simply sleeps.
    """
    if seconds <= 0:
        return
    wait = getattr(bench, "wait", None)
    if callable(wait):
        wait(seconds)
    else:
        time.sleep(seconds)

"""Heater-phase models, fits, calibration maps and the bootstrap calibration procedure."""

from photonics import __version__

__all__ = ["__version__"]

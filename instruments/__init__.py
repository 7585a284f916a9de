"""Instrument drivers, transports, the mesh controller and the simulated bench (instruments.sim)."""

from photonics import __version__

__all__ = ["__version__"]

"""The ``lumion`` command and bench scripts.

``__version__`` is the installed distribution's version (``lumion --version`` prints it).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lumion")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

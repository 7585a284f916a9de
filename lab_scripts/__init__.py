"""The ``lumion`` command and bench scripts.

``__version__`` is the installed distribution's version (``lumion --version`` prints it).
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``: the one of :mod:`photonics` (the same distribution), read on first use."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import photonics

    return str(photonics.__version__)


__all__ = ["__version__"]

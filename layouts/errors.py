"""Errors raised by the layout package (importable without gdsfactory)."""

from __future__ import annotations

from photonics.errors import LumionError


class LayoutError(LumionError):
    """The layout cannot be drawn for this mesh or these parameters; the message says why."""


class LayoutDependencyError(LayoutError):
    """gdsfactory (the ``layout`` extra) is not installed."""


def require_gdsfactory() -> object:
    """Import gdsfactory, activate its generic PDK and return the module.

    gdsfactory is an optional extra and slow to import (~2 s), so every function that
    needs it calls this instead of importing it at module level.
    """
    try:
        import gdsfactory as gf
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise LayoutDependencyError(
            "drawing layouts needs gdsfactory: pip install 'lumion[layout]'"
        ) from exc
    gf.gpdk.PDK.activate()
    return gf

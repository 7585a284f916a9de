"""Errors raised by the layout package (importable without gdsfactory)."""

from __future__ import annotations

from typing import Any

from photonics.errors import LumionError


class LayoutError(LumionError):
    """The layout cannot be drawn for this mesh or these parameters; the message says why."""


class LayoutDependencyError(LayoutError):
    """gdsfactory (the ``layout`` extra) is not installed."""


def require_gdsfactory() -> Any:
    """Import gdsfactory, make sure a PDK is active and return the module.

    gdsfactory is an optional extra and slow to import (~2 s), so every function that
    needs it calls this instead of importing it at module level. The PDK a user has
    activated is kept: gdsfactory's generic PDK is activated only when none is active
    (and gdsfactory's own configuration names none), so cells draw with the user's PDK.
    """
    try:
        import gdsfactory as gf
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise LayoutDependencyError(
            "drawing layouts needs gdsfactory: pip install 'lumion[layout]'"
        ) from exc
    try:
        gf.get_active_pdk()  # the active PDK, or the one CONF.pdk names
    except ValueError:  # no PDK active and none configured
        gf.gpdk.PDK.activate()
    return gf

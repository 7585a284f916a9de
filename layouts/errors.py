"""Errors raised by the layout package (importable without gdsfactory)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from photonics.errors import LumionError

#: how gdsfactory 9.45 announces a bundle it could not route (a UserWarning, when it is
#: not asked to raise); it then draws the bundle on its error layer and carries on
GDSFACTORY_ROUTING_WARNING = "Routing failed"


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


@contextmanager
def routing_errors(what: str, hint: str = "") -> Iterator[None]:
    """Make any gdsfactory routing failure inside the block a one-line :class:`LayoutError`.

    Callers ask gdsfactory to raise (``raise_on_error=True``, ``on_collision="error"``,
    ``on_placer_error="error"``: gdsfactory's defaults come from ``gf.CONF``, which a user
    may have set to ignore errors). If a router only warns all the same (its
    "Routing failed" UserWarning, followed by error-marker polygons in the cell), the
    warning is raised here too, so a broken layout is never written silently.

    Args:
        what: what was being routed, e.g. ``"the 40 fibre I/O waveguides"``.
        hint: what the user can change, appended after ``"; "``.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=GDSFACTORY_ROUTING_WARNING, category=UserWarning)
        try:
            yield
        except LayoutError:
            raise
        except Exception as exc:  # kfactory raises RuntimeError/PlacerError/ValueError with its own text
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise LayoutError(f"gdsfactory's router could not route {what} ({lines[0]})"
                              + (f"; {hint}" if hint else "")) from exc

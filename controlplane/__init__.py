"""The rack's control-plane service: API, durable store, telemetry, dashboard (docs/controlplane.md).

- :mod:`~controlplane.store`: the one store module (SQLite in WAL mode, numbered migrations,
  reconfiguration intents, the append-only event log);
- :mod:`~controlplane.placement`: jobs placed and removed around the routes already running;
- :mod:`~controlplane.service`: :class:`~controlplane.service.ControlPlane`, the rack state and
  every reconfiguration as a transaction against the chip;
- :mod:`~controlplane.app`: the HTTP API (FastAPI/ASGI) over a ControlPlane;
- :mod:`~controlplane.security`: bearer token file, body-size and rate limits.

Heavy modules (fastapi, uvicorn) are imported only by :mod:`controlplane.app`.
"""

from photonics import __version__

__all__ = ["__version__"]

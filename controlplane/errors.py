"""The service's errors: each carries the HTTP status and the ``kind`` of the CLI's error contract.

The API answers every failure as ``{"error", "kind", "hint"}`` (the keys of the CLI's
``lumion.error`` object); the kinds extend the CLI's (docs/cli.md) with the HTTP ones.
"""

from __future__ import annotations

from typing import Any

from photonics.errors import LumionError

# kind -> (HTTP status, what the client should do)
KINDS: dict[str, tuple[int, str]] = {
    "input": (422, "fix the request body or path named above (docs/controlplane.md lists every field)"),
    "not-found": (404, "list what exists with GET /api/v1/status"),
    "method": (405, "use a method the path accepts: the Allow header names them (docs/controlplane.md)"),
    "impossible": (
        409,
        "the request is well-formed but the rack cannot meet it now; free accelerators or "
        "spares (DELETE a job, repair an accelerator) or ask for less",
    ),
    "instrument": (
        503,
        "the chip could not be programmed; check the bench, then retry (the service "
        "reads the chip back before its next write)",
    ),
    "unverified": (
        502,
        "light refused the recovery (the reply's verification names the link, measured vs planned): "
        "the chip holds what it held before; calibrate the chip again (lumion calibrate) or report "
        "the suspect TBU failed (POST /api/v1/failures with tbu)",
    ),
    "mismatch": (
        502,
        "light disagreed with the heater state's prediction (the reply's verification names the ports, "
        "measured vs predicted): the chip holds what it held before; check that the service's map is this "
        "chip's, phase-calibrated and recent, and that the state was synthesized with it",
    ),
    "auth": (401, "send the token from the service's token file as 'Authorization: Bearer <token>'"),
    "too-large": (413, "send a smaller body (the limit is in docs/controlplane.md)"),
    "rate-limited": (429, "slow down: wait Retry-After seconds, then retry"),
    "bug": (500, "this is a bug: report it with the service log and the event log (GET /api/v1/events)"),
}


class ServiceError(LumionError):
    """A request the control plane refuses; ``kind`` is a key of :data:`KINDS`."""

    def __init__(self, message: str, kind: str = "input", detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        if kind not in KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind = kind
        self.detail = dict(detail or {})  # extra keys of the error body (e.g. "verification")

    @property
    def status(self) -> int:
        """The HTTP status of this kind."""
        return KINDS[self.kind][0]

    @property
    def hint(self) -> str:
        """What to do, one sentence."""
        return KINDS[self.kind][1]

    def to_dict(self) -> dict[str, str]:
        """The JSON error body."""
        return {**error_body(str(self), self.kind), **self.detail}


def error_body(message: str, kind: str) -> dict[str, str]:
    """``{"error", "kind", "hint"}`` for ``kind``."""
    return {"error": message, "kind": kind, "hint": KINDS[kind][1]}

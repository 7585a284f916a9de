"""Failure reports: what a report may claim, and which committed recovery answers a repeated one.

A scheduler or a health monitor that gets no answer (a timeout, a service restarted by a
crash that rolled its recovery forward) reports the same failure again. The failure's
identity -- the accelerators it names, or a TBU and how it failed -- is recorded in the
intent of the recovery that handled it, together with the reply; a repeat of a failure
already recovered (the accelerators are still out of service, the TBU still failed in
that state) is answered with that committed recovery instead of an error, and nothing
is written to the chip (docs/controlplane.md, "Retries").
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.errors import ServiceError

# A detection time is the epoch second a monitor saw the failure. A report retried after a
# restart of the service comes minutes later; one more than an hour after its detection
# is not timing a recovery any more (and a time in ms instead of s lands 50 000 years
# ahead): both are refused rather than shown as a meaningless detect stage.
MAX_DETECT_AGE_S = 3600.0
# Hosts' clocks under NTP agree within milliseconds; a detection up to 2 s ahead of the
# service's clock is skew between the monitor's host and this one, more is a wrong clock.
MAX_DETECT_AHEAD_S = 2.0


def check_detected(detected_s: float | None, now_s: float | None = None) -> float | None:
    """``detected_s`` (epoch s) as a float, or None; 422 for a non-finite or implausible time."""
    if detected_s is None:
        return None
    if isinstance(detected_s, (bool, str)):  # float(True) is 1.0 and float("1") 1.0: neither is a time
        raise ServiceError(f"detected_s must be a number of epoch seconds, not {detected_s!r}")
    try:
        t = float(detected_s)
    except (TypeError, ValueError):
        raise ServiceError(f"detected_s must be a number of epoch seconds, not {detected_s!r}") from None
    if not math.isfinite(t):
        raise ServiceError(f"detected_s must be a finite number of epoch seconds, not {t}")
    now = time.time() if now_s is None else now_s
    if not now - MAX_DETECT_AGE_S <= t <= now + MAX_DETECT_AHEAD_S:
        raise ServiceError(
            f"detected_s {t:.6g} is not within {MAX_DETECT_AGE_S:g} s before and "
            f"{MAX_DETECT_AHEAD_S:g} s after the service's clock ({now:.3f}); send epoch "
            "seconds (not ms), or leave detected_s out"
        )
    return t


def identity(names: Sequence[str], tbu: str | None, state: str) -> dict[str, Any]:
    """The failure a report names, as recorded in its recovery's intent."""
    if names:
        return {"accelerators": sorted(names)}
    return {"tbu": tbu, "state": state}


def replay(intent: Mapping[str, Any], event: Mapping[str, Any] | None, job_id: str | None) -> dict[str, Any]:
    """The reply of a repeated report: the committed recovery of ``intent``, marked ``replayed``.

    ``event`` is the intent's ``recovery`` event (None when the service died before
    writing it: the recovery was rolled forward at the next start, and no stage was
    measured). 404 when the report names a job the recovery did not concern.
    """
    recorded = intent["change"].get("recovery")
    if recorded is None:  # an intent from a release that did not record its reply
        raise ServiceError(
            f"this failure was already recovered by intent {intent['id']} ({intent['status']}); "
            "GET /api/v1/events shows it",
            "impossible",
        )
    concerned = {recorded.get("job_id"), *recorded.get("jobs_rerouted", [])} - {None}
    if job_id is not None and job_id not in concerned:
        raise ServiceError(
            f"this failure was recovered by intent {intent['id']} for "
            f"{', '.join(sorted(concerned)) or 'no job'}, not for job {job_id}",
            "not-found",
        )
    stages = list(event.get("stages", [])) if event else []
    light = {k: event[k] for k in ("verified", "verification", "light_attempts", "suspect_tbus")
             if event and k in event}
    return {
        **recorded,
        # rolled forward at a restart (no event): the chip's currents were read back, light never looked
        "verified": "not measured",
        **light,
        "intent": intent["id"],
        "intent_status": intent["status"],
        "replayed": True,
        "stages": stages,
        "measured_ms": dict(event.get("measured_ms", {})) if event else {},
    }

"""The HTTP API of the control plane (FastAPI on ASGI; docs/controlplane.md lists every endpoint).

Everything under ``/api/v1`` needs ``Authorization: Bearer <token>`` except ``/api/v1/health``.
Errors are JSON ``{"error", "kind", "hint"}`` (the CLI's error keys). Two layers of plain
ASGI middleware run before any route, outermost first: the gate (:class:`Gate`: the bearer
token is checked first, then the rate limit of the client's bucket, 429, then 401 when a
protected path has no valid token) and the body-size limit (413), so an unauthenticated or
oversized request never reaches a parser or the chip, and a flood of unauthenticated
requests from an address never empties the bucket of the authenticated client there.
Handlers are plain functions: FastAPI runs them in its thread pool, and the
:class:`~controlplane.service.ControlPlane` serialises the reconfigurations of a chip.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from controlplane.errors import ServiceError, error_body
from controlplane.security import MAX_BODY_BYTES, RATE_BURST, RATE_PER_S, RateLimiter, bearer, token_matches
from controlplane.service import ControlPlane
from photonics.errors import LumionError

API = "/api/v1"
PUBLIC = (f"{API}/health",)
API_PAGE = Path(__file__).with_name("static") / "api.html"
STATE_BODY = ("a heater state, lumion.state JSON as `lumion synthesize --out` writes it (its 'prediction' "
              "names the TBUs it uses and the powers light must show)")
MAX_EVENT_ID = 2**63 - 1  # SQLite's largest integer: event ids never exceed it
log = logging.getLogger("lumion.serve")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# ---------------------------------------------------------------------------------------
# Request models
# ---------------------------------------------------------------------------------------
class MulticastGroup(BaseModel):
    """One transmitter to several receivers through a tree of tunable splitters."""

    model_config = ConfigDict(extra="forbid")
    src: str = Field(..., min_length=1, max_length=64, description="the transmitting accelerator")
    dsts: list[str] = Field(..., min_length=1, max_length=64, description="the receiving accelerators")


class JobRequest(BaseModel):
    """A job to place: accelerators by name, or a count of free ones, and a pattern."""

    model_config = ConfigDict(extra="forbid")
    accelerators: list[str] | None = Field(
        None, min_length=2, max_length=256, description="accelerator names, in ring/line order"
    )
    count: int | None = Field(None, ge=2, le=256, description="take this many free (non-spare) accelerators")
    pattern: Literal["ring", "line", "all-to-all", "links", "multicast"] = "ring"
    links: list[list[str]] | None = Field(
        None, min_length=1, max_length=4096, description="pattern 'links': directed [a, b] pairs"
    )
    groups: list[MulticastGroup] | None = Field(
        None, min_length=1, max_length=64, description="pattern 'multicast': each source and its receivers"
    )
    name: str | None = Field(None, min_length=1, max_length=64)


class FailureRequest(BaseModel):
    """A failure: an accelerator, or a TBU and how it failed."""

    model_config = ConfigDict(extra="forbid")
    accelerator: str | None = Field(None, min_length=1, max_length=64)
    accelerators: list[str] | None = Field(
        None, min_length=1, max_length=64, description="several that failed together: one recovery"
    )
    tbu: str | None = Field(None, min_length=1, max_length=64, description="e.g. tbu:0.4.3")
    state: Literal["dead", "bar", "cross"] = "dead"
    detected_s: float | None = Field(
        None,
        allow_inf_nan=False,
        strict=True,  # a JSON true or "1" is not a time: refused, not read as 1 s after 1970
        description="epoch s when the failure was detected (detect stage); finite, within the last "
        "hour and at most 2 s ahead of the service's clock",
    )
    policy: Literal["hitless", "fewest-moves"] | None = Field(
        None, description="recovery policy (default: the fabric's, docs/fabric.md)"
    )


class ShiftRequest(BaseModel):
    """A hidden phase fault on a simulated chip's TBU."""

    model_config = ConfigDict(extra="forbid")
    rad: float = Field(..., ge=-10.0, le=10.0, allow_inf_nan=False,
                       description="passive phase shift (rad); pi swaps the TBU's bar and cross")


# ---------------------------------------------------------------------------------------
# Middleware (plain ASGI)
# ---------------------------------------------------------------------------------------
async def _send_error(
    send: Send, status: int, message: str, kind: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(error_body(message, kind)).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413 before the application sees it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_big = f"the request body is over the {self.limit} byte limit"
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_error(send, 413, too_big, "too-large")
            return
        chunks, size, more = [], 0, True
        while more:  # buffer (bounded by the limit) so a chunked body is counted too
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _send_error(send, 413, too_big, "too-large")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class Gate:
    """Authenticate, then rate-limit by (client address, authenticated), then refuse (401).

    The token is checked first so that the bucket can be chosen by it: requests without a
    valid token (public pages, probes, a guessing attacker) share one bucket per address,
    requests with it another, and 400 unauthenticated requests cannot make the
    scheduler's next authenticated failure report wait (a 429). A wrong token is counted
    in the unauthenticated bucket, so guessing is rate-limited too. ``token`` None: no
    authentication (embedding only), every request counts as authenticated.
    """

    def __init__(self, app: ASGIApp, token: str | None, limiter: RateLimiter) -> None:
        self.app, self.token, self.limiter = app, token, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        headers = dict(scope.get("headers") or [])
        given = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        authed = self.token is None or token_matches(given, self.token)
        client = (scope.get("client") or ("?", 0))[0]
        wait = self.limiter.allow(f"{client} {'token' if authed else 'anonymous'}")
        if wait > 0:
            await _send_error(
                send,
                429,
                f"more than {self.limiter.rate:g} requests/s from {client}"
                f"{'' if authed else ' without a valid token'}",
                "rate-limited",
                {"Retry-After": str(max(1, round(wait + 0.5)))},
            )
            return
        if not authed and path.startswith("/api/") and path not in PUBLIC:
            what = "no bearer token" if given is None else "a wrong bearer token"
            await _send_error(
                send, 401, f"{what} for {path}", "auth", {"WWW-Authenticate": 'Bearer realm="lumion"'}
            )
            return
        await self.app(scope, receive, send)


# ---------------------------------------------------------------------------------------
# The application
# ---------------------------------------------------------------------------------------
def _start_telemetry(cp: ControlPlane, period_s: float | None, policy: str) -> Any:
    """Start optical failure detection (controlplane.telemetry), if present and asked for."""
    if not period_s or period_s <= 0:
        return None
    try:
        from controlplane import telemetry
    except ImportError:
        log.warning("controlplane.telemetry is not installed; optical failure detection is off")
        return None
    return telemetry.start(cp, period_s, policy)


def _mount_dashboard(app: FastAPI, cp: ControlPlane) -> None:
    try:
        from controlplane import dashboard
    except ImportError:
        log.warning("controlplane.dashboard is not installed; no dashboard page")
        return
    dashboard.mount(app, cp)


def create_app(
    cp: ControlPlane,
    *,
    token: str | None,
    telemetry_period_s: float | None = None,
    on_dark: str = "alert",
    rate_per_s: float = RATE_PER_S,
    rate_burst: float = RATE_BURST,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> ASGIApp:
    """The ASGI application serving ``cp`` (``token`` None: no authentication, for embedding only).

    Telemetry (``controlplane.telemetry.start(cp, period_s, policy)``) starts with the
    application and stops with it; ``on_dark`` is its policy (``auto`` reports a dark
    accelerator as failed, ``alert`` only logs it).
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runner = _start_telemetry(cp, telemetry_period_s, on_dark)
        cp.log_event("service-started", telemetry=runner is not None, on_dark=on_dark)
        try:
            yield
        finally:
            if runner is not None:
                runner.stop()
            cp.log_event("service-stopped")

    app = FastAPI(
        title="LUMION control plane",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's /docs and /redoc load their scripts from a CDN: _api_docs serves one
        redoc_url=None,
        description="One rack's photonic fabric: jobs, failures and recoveries, heater states "
        "(synthesized unitaries and filters, checked by light), state and events. "
        "Every /api/v1 endpoint but /api/v1/health needs 'Authorization: Bearer <token>'.",
    )
    auth = [Depends(HTTPBearer(auto_error=False))]  # documents the scheme; Gate enforces it
    _handlers(app)
    _api_docs(app)
    _routes(app, cp, auth)
    _simulation_routes(app, cp, auth)
    _mount_dashboard(app, cp)
    return Gate(BodyLimit(app, max_body_bytes), token, RateLimiter(rate_per_s, rate_burst))


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or "body"
        body = error_body(f"{where}: {first.get('msg', 'invalid')}", "input")
        body["detail"] = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors
        ]
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not-found", 405: "method"}.get(exc.status_code, "input")
        # Starlette puts the path's methods in exc.headers["Allow"]; keep them for the client.
        body = error_body(str(exc.detail), kind)
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def bug(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(error_body(f"{type(exc).__name__}: {exc}"[:400], "bug"), status_code=500)


def _api_docs(app: FastAPI) -> None:
    """``GET /docs``: the endpoints, rendered in the page from ``/openapi.json`` (nothing from outside)."""
    from fastapi.responses import FileResponse

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> FileResponse:
        return FileResponse(API_PAGE, media_type="text/html", headers={"Cache-Control": "no-cache"})


def _routes(app: FastAPI, cp: ControlPlane, auth: list[Any]) -> None:
    def _report(job_id: str | None, req: FailureRequest) -> dict[str, Any]:
        return cp.report_failure(job_id, accelerator=req.accelerator, tbu=req.tbu, state=req.state,
                                 detected_s=req.detected_s, accelerators=req.accelerators, policy=req.policy)

    @app.get(f"{API}/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness (no token needed): the chip id and whether its state is known."""
        return {"ok": True, "chip_id": cp.chip_id, "state_known": bool(cp.controller.state_known)}

    @app.get(f"{API}/status", tags=["rack"], dependencies=auth)
    def status() -> dict[str, Any]:
        """Fabric, chip, jobs and every link with its planned (and, with telemetry, live) margin."""
        return cp.status()

    @app.post(f"{API}/jobs", tags=["jobs"], dependencies=auth, status_code=201)
    def create_job(req: JobRequest) -> dict[str, Any]:
        """Place a job (409 when it does not fit) and program the chip. ``pattern: multicast`` with
        ``groups``: trees of tunable splitters, every branch checked by its own light.
        """
        return cp.place_job(
            accelerators=req.accelerators,
            count=req.count,
            pattern=req.pattern,
            links=req.links,
            name=req.name,
            groups=None if req.groups is None else [g.model_dump() for g in req.groups],
        )

    @app.get(f"{API}/jobs/{{job_id}}", tags=["jobs"], dependencies=auth)
    def get_job(job_id: str) -> dict[str, Any]:
        """One running job: accelerators, links and margins."""
        return cp.job(job_id)

    @app.delete(f"{API}/jobs/{{job_id}}", tags=["jobs"], dependencies=auth)
    def delete_job(job_id: str) -> dict[str, Any]:
        """Stop a job: park the TBUs only it used, free its accelerators and spares."""
        return cp.delete_job(job_id)

    @app.post(f"{API}/jobs/{{job_id}}/failures", tags=["failures"], dependencies=auth)
    def report_failure(job_id: str, req: FailureRequest) -> dict[str, Any]:
        """Recover from a failed accelerator or TBU; the recovery (``lumion failover --json`` keys)."""
        return _report(job_id, req)

    @app.post(f"{API}/failures", tags=["failures"], dependencies=auth)
    def report_failure_anywhere(req: FailureRequest) -> dict[str, Any]:
        """Like the per-job report, for whichever job holds the accelerator (or every job a TBU cuts)."""
        return _report(None, req)

    @app.post(f"{API}/accelerators/{{name}}/repair", tags=["failures"], dependencies=auth)
    def repair(name: str) -> dict[str, Any]:
        """Put a failed accelerator back in service (replaced or fixed)."""
        return cp.repair(name)

    @app.post(f"{API}/tbus/{{tbu}}/clear", tags=["failures"], dependencies=auth)
    def clear_suspect(tbu: str) -> dict[str, Any]:
        """Clear a suspect TBU (light blamed it during a repair): routing may use it again."""
        return cp.clear_suspect(tbu)

    @app.post(f"{API}/states", tags=["states"], dependencies=auth, status_code=201,
              responses={502: {"description": "light disagreed with the state (kind mismatch): the chip "
                                              "was restored, the reply's verification names the ports"}})
    def apply_state(document: Annotated[dict[str, Any], Body(description=STATE_BODY)]) -> dict[str, Any]:
        """Set a heater state (what ``lumion synthesize --out`` writes for a unitary or a filter) on
        the TBUs it uses, through the phase-calibrated map, and check it by light against its
        prediction, as ``lumion program`` does. ``status``: ok, or unverified (``verification``
        names the arms and inputs light could not confirm). Refused before any write: 422 not a
        state or another mesh; 409 an ideal or power-only map, a failed or suspect TBU, a TBU a
        running job's links or another state hold (named). Light off the prediction, or a running
        link moved: 502 ``mismatch``, the previous currents written back.
        """
        return cp.apply_state(document)

    @app.get(f"{API}/states", tags=["states"], dependencies=auth)
    def list_states() -> dict[str, Any]:
        """The heater states applied on the chip, oldest first, each with its check by light."""
        return {"states": cp.heater_states()}

    @app.get(f"{API}/states/{{state_id}}", tags=["states"], dependencies=auth)
    def get_state(state_id: str) -> dict[str, Any]:
        """One applied heater state: its TBUs, ports and check by light."""
        return cp.heater_state(state_id)

    @app.delete(f"{API}/states/{{state_id}}", tags=["states"], dependencies=auth)
    def clear_state(state_id: str) -> dict[str, Any]:
        """Clear a heater state: its TBUs parked and free for routes again."""
        return cp.clear_state(state_id)

    @app.get(f"{API}/events", tags=["rack"], dependencies=auth)
    def events(
        since: int = Query(0, ge=0, le=MAX_EVENT_ID, description="return events with id > since"),
        limit: int = Query(500, ge=1, le=5000),
    ) -> dict[str, Any]:
        """The event log after ``since`` (oldest first); ``last_id`` is the next ``since``."""
        rows = cp.events(since, limit)
        return {"events": rows, "last_id": rows[-1]["id"] if rows else since}


def _simulation_routes(app: FastAPI, cp: ControlPlane, auth: list[Any]) -> None:
    """Fault injection on a simulated bench only (``lumion serve --bench sim``): kill or
    revive an accelerator's transmitter, so optical failure detection can be tried end to
    end. Absent on a real bench, where a failure is a real one.
    """
    sim = getattr(getattr(cp, "bench", None), "sim", None)
    if sim is None or not hasattr(sim, "kill_transmitter"):
        return

    def _act(action: str, name: str) -> dict[str, Any]:
        if name not in cp.fabric.names:  # the simulator also takes ports and module lanes: not here
            raise ServiceError(
                f"unknown accelerator {name!r}; the fabric has {', '.join(cp.fabric.names)}", "not-found"
            )
        try:
            record = getattr(sim, f"{action}_transmitter")(name)
        except ValueError as exc:
            raise ServiceError(str(exc), "not-found") from None
        cp.log_event(f"sim-{action}", accelerator=name, lanes=record["lanes"], ports=record["ports"])
        return {"accelerator": name, "action": action, "lanes": record["lanes"], "ports": record["ports"]}

    @app.post(f"{API}/sim/accelerators/{{name}}/kill", tags=["simulation"], dependencies=auth)
    def kill(name: str) -> dict[str, Any]:
        """Simulated bench only: the accelerator's transmitter goes dark (telemetry should notice)."""
        return _act("kill", name)

    @app.post(f"{API}/sim/accelerators/{{name}}/revive", tags=["simulation"], dependencies=auth)
    def revive(name: str) -> dict[str, Any]:
        """Simulated bench only: the accelerator's transmitter emits again."""
        return _act("revive", name)

    @app.post(f"{API}/sim/tbus/{{name}}/shift", tags=["simulation"], dependencies=auth)
    def shift(name: str, req: ShiftRequest) -> dict[str, Any]:
        """Simulated bench only: a hidden fault, the TBU's passive phase moves by ``rad`` (the
        heater map does not know; only light can tell).
        """
        try:
            t = cp.mesh.tbu_index(name)
        except LumionError as exc:
            raise ServiceError(str(exc), "not-found") from None
        sim.chip.shift_phase(t, req.rad)
        cp.log_event("sim-shift", tbu=cp.mesh.tbu_names[t], rad=req.rad)
        return {"tbu": cp.mesh.tbu_names[t], "action": "shift", "rad": req.rad}

"""``lumion serve``: the rack's control-plane service (HTTP API, durable state, telemetry, dashboard)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from lab_scripts.common import UsageError, add_json_flag, seed
from lab_scripts.errors import CliError, opening, reading

DEFAULT_DB = "lumion-control.db"
DEFAULT_PORT = 8470  # unassigned by IANA; any free port works (--port 0 picks one)
SERVE_SCHEMA = "lumion.serve"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "serve",
        help="run the rack's control-plane service (HTTP API over a bench, durable state)",
        description="Serve one rack's control plane: place jobs, take failure reports and recover "
        "hitlessly, keep the truth in a SQLite database (every reconfiguration is a transaction; "
        "a restart reconciles the chip), log events, detect dark accelerators optically. Binds to "
        "loopback; every /api/v1 endpoint but health needs the bearer token from --token-file "
        "(made 0600 on first start); another address needs --allow-remote, an existing token "
        "file and, recommended, TLS (--ssl-certfile, --ssl-keyfile). Example: lumion serve --port 0 --json",
    )
    p.add_argument(
        "--bench",
        default="sim",
        metavar="sim|FILE.toml",
        help="bench config, or 'sim' for a simulated bench with one transceiver per "
        "accelerator at its fabric ports (default)",
    )
    p.add_argument("--db", default=DEFAULT_DB, metavar="FILE", help=f"the database (default {DEFAULT_DB})")
    p.add_argument(
        "--fabric",
        metavar="FILE.json",
        help="fabric (lumion.fabric v1) for a new database; "
        "default: the one the database records, else the smartlight fabric 8+2",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another than loopback needs --allow-remote "
        "and an existing --token-file)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="serve on a non-loopback --host (the rack's network): the token file must exist "
        "already (the service will not mint a token nobody has seen); give TLS too",
    )
    p.add_argument("--ssl-certfile", metavar="CERT.pem", help="serve HTTPS with this certificate (chain)")
    p.add_argument("--ssl-keyfile", metavar="KEY.pem", help="its private key (with --ssl-certfile)")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"TCP port (default {DEFAULT_PORT}; 0: a free one, printed)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer token file (default: <db>.token; made 0600 with a new token when missing)",
    )
    p.add_argument(
        "--telemetry-period-s",
        type=float,
        default=1.0,
        metavar="S",
        help="poll the transceivers' DOM every S seconds (0: no optical detection; default 1)",
    )
    p.add_argument(
        "--on-dark",
        choices=("auto", "alert"),
        default="alert",
        help="a dark accelerator: auto = report it failed and recover, alert = log an event (default)",
    )
    p.add_argument(
        "--rate-limit-per-s",
        type=float,
        default=None,
        metavar="N",
        help="requests/s allowed per client address (0: no limit; default 100, burst 200)",
    )
    p.add_argument("--map", metavar="MAP.json", help="calibration map of the chip (recorded in the "
                   "database and kept on later starts); default: the recorded one, else the ideal map")
    p.add_argument("--seed", type=seed, default=None, help="chip seed for the simulated bench")
    p.add_argument("--light", choices=("repair", "report"), default=None,
                   help="a recovery light rejects (a link more than 3 dB from plan): repair (route around "
                   "the suspect TBUs, else refuse with 502 and the chip restored) or report (commit it, "
                   "the reply says verified: off); default: repair with a fitted map, report with the "
                   "ideal one (docs/controlplane.md, 'Verified by light')")
    add_json_flag(p)
    p.set_defaults(run=run)


def sim_bench_config(fabric: Any, chip_seed: int | None) -> dict[str, Any]:
    """A simulated bench on the fabric's mesh with one SFF-8636 module per accelerator at its ports."""
    from instruments.config import default_config

    cfg = default_config(fabric.mesh_spec or "smartlight", chip_seed or 0)
    names = fabric.mesh.port_names
    cfg["transceivers"] = [
        {
            "name": a.name,
            "spec": "sff8636",
            "address": "sim",
            "tx_ports": [names[p] for p in a.tx],
            "rx_ports": [names[p] for p in a.rx],
        }
        for a in fabric.accelerators
    ]
    return cfg


def _fabric(args: argparse.Namespace, store: Any) -> tuple[Any, Any]:
    """(fabric for the bench, fabric to bind: None when the database already records one)."""
    from photonics.fabric import Fabric, default_fabric

    if args.fabric:
        with reading("fabric file", args.fabric):
            fabric = Fabric.load(args.fabric)
        return fabric, fabric
    recorded = store.fabrics()
    if len(recorded) == 1:
        with reading("fabric recorded in", args.db):
            return Fabric.from_dict(recorded[0], f"the fabric recorded in {args.db}"), None
    fabric = default_fabric()
    return fabric, fabric if not recorded else None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response goes out as headers then body, and with
    # Nagle on, the body waits for the client's delayed ACK (40 ms per keep-alive request).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"--host {host} --port {port}: cannot bind ({exc.strerror}); choose another port "
            "(--port 0 picks a free one)"
        ) from exc
    sock.listen(128)
    return sock


def _check_exposure(args: argparse.Namespace, loopback: bool) -> None:
    """Refuse a network bind without its opt-in and an existing token; TLS files in pairs."""
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        raise UsageError("give --ssl-certfile and --ssl-keyfile together (the certificate and its key)")
    for flag, path in (("--ssl-certfile", args.ssl_certfile), ("--ssl-keyfile", args.ssl_keyfile)):
        if path and not os.access(path, os.R_OK):
            raise UsageError(f"{flag} {path}: no such readable file")
    if loopback:
        return
    if not args.allow_remote:
        raise UsageError(
            f"--host {args.host} is not loopback: add --allow-remote to serve the rack on the network, "
            "with --token-file naming an existing token file (and --ssl-certfile/--ssl-keyfile for TLS)"
        )
    if args.token_file is None or not Path(args.token_file).is_file():
        raise UsageError(
            f"--host {args.host} --allow-remote needs --token-file naming an existing token file "
            "(the service will not put a token nobody has seen on the network); make one first: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE; chmod 600 FILE"
        )


def run(args: argparse.Namespace) -> int:
    """Open the store and the bench, reconcile, announce, serve until SIGINT/SIGTERM."""
    from controlplane.security import RATE_PER_S, is_loopback, load_or_create_token, read_token
    from controlplane.store import Store

    _check_exposure(args, is_loopback(args.host))
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: give 0..65535")
    if args.telemetry_period_s < 0:
        raise UsageError("--telemetry-period-s must be >= 0 (0 turns optical detection off)")
    db = Path(args.db)
    token_file = Path(args.token_file) if args.token_file else db.with_name(db.name + ".token")
    stop = StopRequest()  # a SIGTERM while starting is a stop asked for, not a death (exit 143)
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    store = None
    bench = None
    try:
        store = Store(db, exclusive=True)
        bench_fabric, bind_fabric = _fabric(args, store)
        if is_loopback(args.host):
            token, created = load_or_create_token(token_file)
        else:  # checked to exist by _check_exposure: on a network, only a token somebody has
            token, created = read_token(token_file), False
        if args.bench == "sim":
            cfg: Any = sim_bench_config(bench_fabric, args.seed)
        else:
            from instruments.config import load_config

            with reading("bench config", args.bench):
                cfg = load_config(args.bench)
        from instruments.config import open_bench

        heater_map = None
        if args.map:  # every file is read and checked before any instrument is opened
            from calibration.map import CalibrationMap

            with reading("calibration map", args.map):
                heater_map = CalibrationMap.load(args.map, mesh=bench_fabric.mesh)
        with opening(f"bench {args.bench}"):
            bench = open_bench(cfg, seed=args.seed)
        if heater_map is not None:
            with reading("calibration map", args.map):  # refuses a map made for another chip
                heater_map.check_for(chip_id=bench.chip_id, mesh=bench.mesh, source=args.map)
            bench.controller.heater_map = heater_map
        return _serve(
            args,
            store,
            bench,
            bind_fabric,
            token,
            token_file,
            created,
            RATE_PER_S if args.rate_limit_per_s is None else args.rate_limit_per_s,
            stop,
        )
    finally:
        if store is not None:
            store.close()
        if bench is not None:
            bench.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """The signal handler from the start of ``run`` until uvicorn takes the signals over.

    Before it, a SIGTERM sent right after the announce line (uvicorn is still being
    imported) killed the process with exit 143 and no ``service-stopped`` event. Now
    the signal is remembered, and the server starts, sees it and stops gracefully.
    """

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, sig: int, frame: Any) -> None:  # noqa: ARG002 -- signal handler signature
        self.signal = sig


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, minus re-raising SIGTERM/SIGINT after the graceful shutdown.

        uvicorn re-raises the captured signal so the process dies of it; ``lumion serve``
        instead closes the bench and the store and exits 0 (a stop asked for is a success).
        A stop asked for before uvicorn's handlers were installed (``stop``) is honoured
        once the server has started: its lifespan runs both ways (``service-started``,
        ``service-stopped``).
        """

        def __init__(self, config: Any, stop: StopRequest) -> None:
            super().__init__(config)
            self.stop = stop

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.stop.signal is not None:  # uvicorn's handlers are in place since serve()
                self.should_exit = True

        def handle_exit(self, sig: int, frame: Any) -> None:  # noqa: ARG002 -- uvicorn's signature
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True  # a second Ctrl-C: stop without waiting for requests
            else:
                self.should_exit = True

    return Server


def _urls(host: str, port: int, tls: bool) -> dict[str, str]:
    """``url``, ``api`` and ``bind`` of the listening socket.

    A wildcard bind (0.0.0.0, ::) is no address a client can use: the URL names this host
    (its fully qualified name), ``bind`` what the socket is bound to.
    """
    shown = f"[{host}]" if ":" in host else host
    wildcard = host in ("0.0.0.0", "::")
    name = socket.getfqdn() if wildcard else shown
    url = f"{'https' if tls else 'http'}://{name}:{port}"
    return {"url": url, "api": f"{url}/api/v1", "bind": f"{shown}:{port}"}


def _serve(
    args: argparse.Namespace,
    store: Any,
    bench: Any,
    fabric: Any,
    token: str,
    token_file: Path,
    created: bool,
    rate: float,
    stop: StopRequest,
) -> int:
    from calibration.heater_map import IdealMap
    from controlplane.app import create_app
    from controlplane.errors import ServiceError
    from controlplane.security import is_loopback
    from controlplane.service import ControlPlane

    try:
        # reads the chip back and reconciles
        cp = ControlPlane(store, bench, fabric, light_policy=getattr(args, "light", None))
    except ServiceError as exc:  # the service's kinds, in the CLI's words and exit codes
        kind = {"instrument": "instrument", "impossible": "impossible"}.get(exc.kind, "input")
        raise CliError(str(exc), kind, type(exc).__name__) from exc
    actions = [a for a in (cp.store.events(0, 5000) or []) if a["kind"] == "state-loaded"][-1:]
    sock = _listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    tls = bool(args.ssl_certfile)
    app = create_app(
        cp, token=token, telemetry_period_s=args.telemetry_period_s, on_dark=args.on_dark, rate_per_s=rate
    )
    info = {
        "schema": SERVE_SCHEMA,
        "version": 1,
        **_urls(host, port, tls),
        "tls": tls,
        "token_file": str(token_file),
        "token_created": created,
        "db": str(store.path),
        "pid": os.getpid(),
        "chip_id": cp.chip_id,
        "fabric": cp.fabric.name,
        "bench": args.bench,
        "reconciled": actions[0]["actions"] if actions else [],
        "telemetry_period_s": args.telemetry_period_s,
        "on_dark": args.on_dark,
        "heater_map": "ideal" if isinstance(cp.heater_map, IdealMap) else "fitted",
    }
    if info["heater_map"] == "ideal" and args.telemetry_period_s > 0:
        # Not an error (a bench can be served before it is calibrated), but never silent:
        # through the ideal law routes leak, and a dark transmitter may not show in the DOM.
        print(f"warning: no calibration map for chip {cp.chip_id}: routes are programmed through "
              "the ideal heater law, leak light, and optical detection may miss a dark accelerator; "
              "calibrate the chip (lumion calibrate) and restart with --map MAP.json", file=sys.stderr)
    if not tls and not is_loopback(args.host):
        print(f"warning: serving {info['bind']} without TLS: the bearer token crosses the network in "
              "clear; give --ssl-certfile and --ssl-keyfile", file=sys.stderr)
    if args.json:
        print(json.dumps(info), flush=True)
    else:
        print(
            f"lumion control plane for chip {cp.chip_id} ({cp.fabric.name}) at {info['url']}\n"
            f"  token file {token_file}{' (new)' if created else ''}; database {store.path}\n"
            f"  reconciled: {info['reconciled'] or 'nothing to do'}\n  serving; Ctrl-C to stop",
            flush=True,
        )
    import uvicorn

    from controlplane.protocol import JsonErrorH11Protocol

    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        http=JsonErrorH11Protocol,  # its own 400s as the API's JSON error
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    try:
        config.load()  # reads the certificate and key: refused in one line before serving
    except (OSError, ValueError) as exc:
        raise UsageError(f"--ssl-certfile/--ssl-keyfile: cannot load them ({exc})") from exc
    server = _server_class()(config, stop)
    server.run(sockets=[sock])
    print("stopped", file=sys.stderr)
    return 0

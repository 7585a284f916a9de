"""``lumion bench serve``: start the simulated instruments and serve them until interrupted."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

from lab_scripts.common import add_json_flag, mesh_spec, print_json, seed
from lab_scripts.errors import CliError, reading
from lab_scripts.paths import TOML_SUFFIXES, output_file
from photonics.bounded_read import SETTINGS_FILE_MAX_BYTES, read_text

# Signals that stop the server cleanly (simulators closed, its config removed): Ctrl-C,
# `kill PID`, and the hang-up a background job gets when its terminal closes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "bench",
        help="start the simulated bench instruments and print their addresses",
        description="Start the simulated heater driver (pty), laser and power meter (SCPI on "
        "127.0.0.1) and transceivers (I2C bridges on ptys) around one seeded chip, print their "
        "addresses and serve until SIGINT/SIGTERM/SIGHUP. --write-config writes a bench config naming "
        "this process ([server] pid) once the simulators listen, and removes it when the server stops. "
        "Example: lumion bench serve --json --write-config sim-bench.toml & (wait for the file), then "
        "lumion program --bench sim-bench.toml ...; kill %1 stops it",
    )
    p.add_argument("action", choices=["serve"], help="serve: run the simulators")
    p.add_argument("--config", metavar="FILE.toml", help="bench config (its sim addresses are started)")
    p.add_argument("--mesh", default=None, help="mesh when no config is given (default smartlight)")
    p.add_argument("--seed", type=seed, default=None, help="chip seed (overrides [sim] seed)")
    p.add_argument("--write-config", metavar="FILE.toml",
                   help="write a bench config that points at the running simulators (with this "
                   "process's pid; removed again when the server stops)")
    add_json_flag(p)
    p.set_defaults(run=run)


def _file_server(path: Path) -> int | None:
    """The pid a bench config at ``path`` names as its server (None: no file, or none named)."""
    from instruments.config import server_pid

    try:
        return server_pid(tomllib.loads(read_text(path, SETTINGS_FILE_MAX_BYTES, "bench config")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _claim(path: Path) -> None:
    """Refuse a config path another running server owns; remove one whose server has stopped.

    Removed before the simulators start, so nobody waiting for the file mistakes the stale
    one for this server's.
    """
    from instruments.config import process_alive

    pid = _file_server(path)
    if pid is None or pid == os.getpid():
        return
    if process_alive(pid):
        raise CliError(f"{path} belongs to a running lumion bench serve (pid {pid}); stop it "
                       f"(kill {pid}) or give another --write-config path", "input")
    path.unlink(missing_ok=True)


@contextlib.contextmanager
def _served_config(path: Path | None, text: str) -> Iterator[None]:
    """Write ``text`` to ``path`` atomically for the life of the block, then remove it if still ours."""
    from photonics.topology import atomic_write_text

    if path is None:
        yield
        return
    atomic_write_text(path, text)
    try:
        yield
    finally:
        if _file_server(path) == os.getpid():  # not replaced by someone else meanwhile
            path.unlink(missing_ok=True)


def _announce(addresses: dict, write_config: Path | None) -> None:
    """The human-readable list of addresses."""
    print(f"simulated bench for chip {addresses['chip_id']} ({addresses['mesh']}):")
    for key in ("heater_driver", "heater_driver_url", "laser", "power_meter"):
        print(f"  {key:18s} {addresses[key]}")
    for name, addr in addresses["transceivers"].items():
        print(f"  transceiver {name:6s} {addr}")
    if write_config:
        print(f"  config             {write_config} (removed when the server stops)")
    print(f"serving as pid {os.getpid()}; Ctrl-C or kill {os.getpid()} to stop", flush=True)


def run(args: argparse.Namespace) -> int:
    """Start, announce, wait for a signal, stop (removing the config it wrote)."""
    from instruments.config import default_config, load_config, server_entry, start_simulators
    from photonics.topology import mesh_from_spec

    write_config = output_file(args.write_config, "--write-config", TOML_SUFFIXES) \
        if args.write_config is not None else None
    if args.config:
        with reading("bench config", args.config):
            cfg = load_config(args.config)
    else:
        cfg = default_config(args.mesh or "smartlight")
    if args.mesh:
        cfg["mesh"] = args.mesh
    with reading("mesh", cfg.get("mesh", "smartlight")):
        mesh = mesh_from_spec(cfg.get("mesh", "smartlight"))  # checked before any simulator starts
    if write_config:
        _claim(write_config)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in STOP_SIGNALS}
    sim = start_simulators(cfg, args.seed)
    try:
        addresses = {**sim.addresses(), "mesh": mesh_spec(mesh, cfg.get("mesh", "smartlight")),
                     "config": str(write_config) if write_config else None, "pid": os.getpid()}
        text = sim.client_config(cfg.get("mesh", "smartlight"), server=server_entry())
        with _served_config(write_config, text):
            if args.json:
                print_json(addresses, one_line=True)
            else:
                _announce(addresses, write_config)
            while not stop.wait(0.2):
                pass
    finally:
        sim.close()
        for s, h in previous.items():
            signal.signal(s, h)
    print("stopped", file=sys.stderr)
    return 0

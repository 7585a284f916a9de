"""``lumion bench serve``: start the simulated instruments and serve them until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from lab_scripts.common import add_json_flag, mesh_spec, print_json, seed
from lab_scripts.errors import reading
from lab_scripts.paths import TOML_SUFFIXES, output_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "bench",
        help="start the simulated bench instruments and print their addresses",
        description="Start the simulated heater driver (pty), laser and power meter (SCPI on "
        "127.0.0.1) and transceivers (I2C bridges on ptys) around one seeded chip, print their "
        "addresses and serve until SIGINT/SIGTERM. Example: lumion bench serve --json "
        "--write-config sim-bench.toml, then lumion program --bench sim-bench.toml ...",
    )
    p.add_argument("action", choices=["serve"], help="serve: run the simulators")
    p.add_argument("--config", metavar="FILE.toml", help="bench config (its sim addresses are started)")
    p.add_argument("--mesh", default=None, help="mesh when no config is given (default smartlight)")
    p.add_argument("--seed", type=seed, default=None, help="chip seed (overrides [sim] seed)")
    p.add_argument("--write-config", metavar="FILE.toml",
                   help="write a bench config that points at the running simulators")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Start, announce, wait for a signal, stop."""
    from instruments.config import default_config, load_config, start_simulators
    from photonics.topology import atomic_write_text, mesh_from_spec

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
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    sim = start_simulators(cfg, args.seed)
    try:
        addresses = {**sim.addresses(), "mesh": mesh_spec(mesh, cfg.get("mesh", "smartlight")),
                     "config": None}
        if write_config:
            atomic_write_text(write_config, sim.client_config(cfg.get("mesh", "smartlight")))
            addresses["config"] = str(write_config)
        if args.json:
            print_json(addresses, one_line=True)
        else:
            print(f"simulated bench for chip {addresses['chip_id']} ({addresses['mesh']}):")
            for key in ("heater_driver", "heater_driver_url", "laser", "power_meter"):
                print(f"  {key:18s} {addresses[key]}")
            for name, addr in addresses["transceivers"].items():
                print(f"  transceiver {name:6s} {addr}")
            if write_config:
                print(f"  config             {write_config}")
            print("serving; Ctrl-C to stop", flush=True)
        while not stop.wait(0.2):
            pass
    finally:
        sim.close()
        for s, h in previous.items():
            signal.signal(s, h)
    print("stopped", file=sys.stderr)
    return 0

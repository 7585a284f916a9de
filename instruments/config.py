"""Bench configuration (TOML): which driver and address each instrument has.

Example (every ``address = "sim"`` starts the simulators; see docs/instruments.md)::

    schema = "lumion.bench"
    version = 1
    mesh = "smartlight"              # smartlight | hex:RxC | ... | FILE.json
    chip_id = "SL-0042"              # required unless the heater driver is "sim"

    [heater_driver]
    driver = "qontrol"
    address = "/dev/ttyUSB0"         # or "sim", a pty path, "lumionsim://NAME"
    max_current_ma = 24.0
    protocol = "binary"              # or "ascii" (the vendor's two modes; binary is faster)
    max_total_power_mw = 1000.0

    [laser]
    driver = "keysight-8164"
    address = "TCPIP::10.0.0.5::5025::SOCKET"
    idn = "8164B"                    # optional: text *IDN? must contain (wrong address -> error)
    [laser.switch]                   # mesh port = switch output
    "port:0" = 1

    [power_meter]
    driver = "keysight-816x"
    address = "GPIB0::20::INSTR"
    idn = "N7744C"                   # optional, as for the laser
    [power_meter.channels]           # mesh port = [slot, channel]
    "port:5" = [1, 1]

    [[transceivers]]
    name = "gpu0"
    spec = "sff8636"                 # or "cmis"
    address = "smbus:1"              # or "serial-i2c:/dev/ttyACM0", "sim"
    tx_ports = [0, 1, 2, 3]
    rx_ports = [4, 5, 6, 7]
    monitor_period_s = 0.01          # optional: its monitors' sample period (datasheet); 0.1 if not given

    [sim]                            # only read when something is "sim"
    seed = 0
    crosstalk_fraction = 0.01
    heater_link = "pty"              # or "url" (in-process lumionsim://)

    [server]                         # written by `lumion bench serve --write-config` only:
    pid = 4242                       # the process serving these simulated addresses
    host = "bench-pc"                # ... on this machine (its socket.gethostname())
"""

from __future__ import annotations

import math
import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.heater_map import HeaterMap
from instruments.bench_lock import BenchLock
from instruments.controller import InstrumentBench, MeshController
from instruments.errors import BenchConfigError
from instruments.heater_driver import VERIFY_MODES, HeaterDriver
from instruments.laser import TunableLaser
from instruments.power_meter import PowerMeter
from instruments.transceiver import MODULE_ADDRESS, SerialI2CBridge, SMBusI2C, TransceiverModule
from instruments.transport import SerialTransport
from photonics.bounded_read import SETTINGS_FILE_MAX_BYTES, read_text
from photonics.errors import LumionError
from photonics.topology import Mesh, mesh_from_spec

SCHEMA = "lumion.bench"
PROTOCOLS = ("binary", "ascii")
# Binary frames carry a setting in 7 bytes (a module's vector in 7 + 2 per channel) against
# 12-14 ASCII bytes per channel: the whole chip and a failover delta go out in fewer bytes
# (docs/instruments.md, "ASCII or binary"), and both modes confirm each setting by read-back.
DEFAULT_PROTOCOL = "binary"
# Which channels of a vector setting are read back in its own exchange (HeaterDriver
# ``verify``): "last" keeps a whole-chip write at 18 short exchanges; a service that reads
# every current back after each write (the control plane) loses nothing. ``lumion program``
# asks for "all" (docs/instruments.md).
DEFAULT_VERIFY = "last"
DRIVERS = {"heater_driver": {"qontrol"}, "laser": {"keysight-8164"}, "power_meter": {"keysight-816x"}}
# The table `lumion bench serve --write-config` adds: which process serves the simulated
# addresses of the file. Its ptys and ports die with that process, so a file whose server is
# gone points at nothing (a rerun would otherwise fail with "cannot open serial port").
SERVER_TABLE = "server"


def load_config(source: str | Path | Mapping[str, Any] | None) -> dict[str, Any]:
    """Read and validate a bench config (a path, a parsed dict, or None for all-simulated)."""
    if source is None:
        return default_config()
    if isinstance(source, Mapping):
        data, where = dict(source), "bench config"
    else:
        where = str(source)
        try:
            data = tomllib.loads(read_text(source, SETTINGS_FILE_MAX_BYTES, "bench config"))
        except FileNotFoundError as exc:
            raise BenchConfigError(f"bench config {where} does not exist") from exc
        except IsADirectoryError as exc:
            raise BenchConfigError(f"bench config {where} is a folder; give the .toml file") from exc
        except UnicodeDecodeError as exc:
            raise BenchConfigError(f"bench config {where} is not UTF-8 text (TOML must be)") from exc
        except OSError as exc:
            raise BenchConfigError(f"bench config {where} cannot be read: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise BenchConfigError(f"bench config {where} is not valid TOML: {exc}") from exc
    if data.get("schema") != SCHEMA:
        raise BenchConfigError(f"{where}: expected schema = \"{SCHEMA}\" at the top")
    if type(data.get("version")) is not int or data.get("version") != 1:  # `version = true` is not 1
        raise BenchConfigError(f"{where}: unsupported version {data.get('version')!r} (this is version 1)")
    _check_types(data, where)
    _check_server_running(data, where)
    for section, drivers in DRIVERS.items():
        sec = data.get(section)
        if not isinstance(sec, dict) or "address" not in sec:
            raise BenchConfigError(f"{where}: [{section}] needs an address (or \"sim\")")
        if sec.get("driver", next(iter(drivers))) not in drivers:
            raise BenchConfigError(f"{where}: [{section}] driver {sec['driver']!r} unknown; use one of "
                                   f"{sorted(drivers)}")
    if data["heater_driver"].get("protocol", DEFAULT_PROTOCOL) not in PROTOCOLS:
        raise BenchConfigError(f"{where}: [heater_driver] protocol must be one of {list(PROTOCOLS)}, not "
                               f"{data['heater_driver']['protocol']!r}")
    return data


# Value checks of load_config: key -> (what it must be, test). Numbers are never bools
# (TOML `true` is not 1) and never NaN or infinite (a NaN limit compares False with
# everything, so every current would silently pass the limit check).
_POSITIVE = ("a positive number", lambda v: _is_number(v) and math.isfinite(v) and v > 0)
# Slots, channels and switch outputs: no mainframe or switch has 65535 of them, and a
# larger integer (9223372036854775807) would overflow a C int in pyserial or a SCPI reply.
MAX_INDEX = 65535
_COUNT = (f"a positive integer up to {MAX_INDEX}", lambda v: type(v) is int and 1 <= v <= MAX_INDEX)
# pyserial accepts any positive int and fails in the OS (OverflowError) past a C int; real
# USB-serial adapters run 50 baud .. 12 Mbaud (FTDI FT232H).
BAUD_RANGE = (50, 12_000_000)
_BAUD = (f"a baud rate, an integer {BAUD_RANGE[0]}..{BAUD_RANGE[1]}",
         lambda v: type(v) is int and BAUD_RANGE[0] <= v <= BAUD_RANGE[1])
_TEXT = ("a string", lambda v: isinstance(v, str))
_FIELDS: dict[str, dict[str, tuple[str, Any]]] = {
    "": {"mesh": _TEXT, "chip_id": _TEXT},
    "heater_driver": {"address": _TEXT, "driver": _TEXT, "protocol": _TEXT, "max_current_ma": _POSITIVE,
                      "max_total_power_mw": _POSITIVE, "baudrate": _BAUD,
                      "verify": ("\"last\" or \"all\"", lambda v: v in VERIFY_MODES)},
    "laser": {"address": _TEXT, "driver": _TEXT, "switch_slot": _COUNT, "switch_channel": _COUNT,
              "switch_outputs": _COUNT},
    "power_meter": {"address": _TEXT, "driver": _TEXT},
    "sim": {"seed": ("an integer >= 0", lambda v: type(v) is int and v >= 0),
            "crosstalk_fraction": ("a fraction 0 <= f < 1",
                                   lambda v: _is_number(v) and math.isfinite(v) and 0 <= v < 1),
            "heater_link": ("\"pty\" or \"url\"", lambda v: v in ("pty", "url")),
            "chip": ("\"realistic\" or \"ideal\"", lambda v: v in ("realistic", "ideal"))},
    SERVER_TABLE: {"pid": _COUNT, "host": _TEXT},
}
# A module's monitor sample period (s) as its datasheet gives it (a few ms to ~100 ms): the
# light meter's dark read waits that long after a TX disable (instruments.light_meter). Up to
# a second: a longer one is a typo for milliseconds, or not a module worth waiting for.
MAX_MONITOR_PERIOD_S = 1.0
_TRANSCEIVER_FIELDS = {"name": _TEXT, "spec": _TEXT, "address": _TEXT,
                       "monitor_period_s": (f"a number of seconds, 0 < s <= {MAX_MONITOR_PERIOD_S:g}",
                                            lambda v: _is_number(v) and 0 < v <= MAX_MONITOR_PERIOD_S)}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_table(table: Any, fields: Mapping[str, tuple[str, Any]], label: str, where: str) -> None:
    if not isinstance(table, dict):
        raise BenchConfigError(f"{where}: [{label}] must be a table")
    for key, (what, ok) in fields.items():
        if key in table and not ok(table[key]):
            name = f"[{label}] {key}" if label else key
            raise BenchConfigError(f"{where}: {name} must be {what}, not {table[key]!r}")


def _check_port_table(table: Any, label: str, where: str, pair: bool) -> None:
    """``[laser.switch]`` (port = output >= 1) or ``[power_meter.channels]`` (port = [slot, channel])."""
    if not isinstance(table, dict):
        raise BenchConfigError(f"{where}: [{label}] must be a table of mesh port = value")
    for port, value in table.items():
        def index(v: Any) -> bool:
            return type(v) is int and 1 <= v <= MAX_INDEX

        ok = (isinstance(value, list) and len(value) == 2 and all(index(v) for v in value)) if pair \
            else index(value)
        if not ok:
            form = f"[slot, channel] (integers 1..{MAX_INDEX})" if pair else \
                f"a switch output (an integer 1..{MAX_INDEX})"
            raise BenchConfigError(f"{where}: [{label}] {port!r} must be {form}, not {value!r}")


def _check_types(data: Mapping[str, Any], where: str) -> None:
    """Refuse wrong-typed, NaN, infinite or negative values with the key that holds them."""
    for section, fields in _FIELDS.items():
        if not section:
            _check_table(data, fields, "", where)
        elif section in data:
            _check_table(data[section], fields, section, where)
    for label, section, key, pair in (("laser.switch", "laser", "switch", False),
                                      ("power_meter.channels", "power_meter", "channels", True)):
        if isinstance(data.get(section), dict) and key in data[section]:
            _check_port_table(data[section][key], label, where, pair)
    transceivers = data.get("transceivers", [])
    if not isinstance(transceivers, list):
        raise BenchConfigError(f"{where}: transceivers must be [[transceivers]] tables")
    for k, spec in enumerate(transceivers):
        _check_table(spec, _TRANSCEIVER_FIELDS, f"transceivers {k}", where)
        for key in ("tx_ports", "rx_ports"):
            ports = spec.get(key, [])
            if not isinstance(ports, list) or not all(
                    (type(p) is int and p >= 0) or isinstance(p, str) for p in ports):
                raise BenchConfigError(f"{where}: [[transceivers]] {spec.get('name', k)!r} {key} must be "
                                       f"a list of mesh ports (numbers >= 0 or names), not {ports!r}")


def server_entry() -> dict[str, Any]:
    """The ``[server]`` table naming this process (on this host) as the server of a bench config."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def server_pid(data: Mapping[str, Any]) -> int | None:
    """The pid of the ``lumion bench serve`` that wrote ``data``, when it ran on this host."""
    server = data.get(SERVER_TABLE)
    if not isinstance(server, Mapping) or type(server.get("pid")) is not int:
        return None
    if server.get("host", socket.gethostname()) != socket.gethostname():
        return None  # another machine's process table cannot be asked
    return int(server["pid"])


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True


def _check_server_running(data: Mapping[str, Any], where: str) -> None:
    """Refuse a config written by a ``lumion bench serve`` that has stopped (its addresses are gone)."""
    pid = server_pid(data)
    if pid is not None and not process_alive(pid):
        raise BenchConfigError(
            f"{where} was written by `lumion bench serve` (pid {pid}), which is no longer running, so "
            f"its simulated instruments are gone; start it again (lumion bench serve --write-config "
            f"{where}) and wait until the file names the new pid")


def default_config(mesh: str = "smartlight", seed: int = 0) -> dict[str, Any]:
    """Every instrument simulated."""
    return {"schema": SCHEMA, "version": 1, "mesh": mesh, "heater_driver": {"address": "sim"},
            "laser": {"address": "sim"}, "power_meter": {"address": "sim"}, "sim": {"seed": seed}}


def _port_map(mesh: Mesh, table: Mapping[str, Any], what: str) -> dict[int, Any]:
    out = {}
    for key, value in table.items():
        try:
            out[mesh.port_index(int(key) if str(key).isdigit() else key)] = value
        except LumionError as exc:
            raise BenchConfigError(f"{what}: {exc}") from exc
    return out


def _expected_idn(section: Mapping[str, Any], name: str) -> str | None:
    """The optional ``idn`` key: text the instrument's ``*IDN?`` reply must contain."""
    idn = section.get("idn")
    if idn is not None and (not isinstance(idn, str) or not idn.strip()):
        raise BenchConfigError(f"[{name}] idn must be a non-empty string such as \"8164B\", not {idn!r}")
    return idn


def shared_addresses(cfg: Mapping[str, Any]) -> list[str]:
    """The instrument addresses another process could also open (locked by :class:`BenchLock`).

    ``sim`` and ``lumionsim://`` simulators live inside this process: nobody else reaches them.
    """
    addrs = [str(cfg[s]["address"]) for s in DRIVERS]
    return [a for a in addrs if a != "sim" and not a.startswith("lumionsim://")]


def uses_sim(cfg: Mapping[str, Any]) -> bool:
    """True when any instrument address is ``sim``."""
    addrs = [cfg[s]["address"] for s in DRIVERS] + [t.get("address") for t in cfg.get("transceivers", [])]
    return "sim" in addrs


def start_simulators(cfg: Mapping[str, Any], seed: int | None = None, chip: Any = None,
                     heater_clock: Any = None) -> Any:
    """Start a :class:`SimulatedBench` wired as ``cfg`` says (around ``chip`` if given).

    ``heater_clock``: the simulated heater module's clock (:mod:`instruments.sim.link_clock`);
    a simulated one only with ``[sim] heater_link = "url"`` (its reads move it).
    """
    link = cfg.get("sim", {}).get("heater_link", "pty")
    if getattr(heater_clock, "simulated", False) and link != "url":
        raise ValueError("a simulated heater clock needs [sim] heater_link = \"url\": only the in-process "
                         f"link's reads move it, not a pty client's ({link!r})")
    from instruments.sim.bench import SimulatedBench

    mesh = chip.mesh if chip is not None else mesh_from_spec(cfg.get("mesh", "smartlight"))
    sim = dict(cfg.get("sim", {}))
    s = int(seed if seed is not None else sim.get("seed", 0))
    switch = cfg["laser"].get("switch")
    heads = cfg["power_meter"].get("channels")
    tx = cfg.get("transceivers")
    options = {"chip": chip} if chip is not None else \
        {"crosstalk_fraction": float(sim.get("crosstalk_fraction", 0.01)),
         "model": str(sim.get("chip", "realistic"))}  # [sim] chip: docs/calibration.md
    return SimulatedBench(
        mesh, s, **options, heater_clock=heater_clock,
        switch_ports={int(k): p for p, k in _port_map(mesh, switch, "[laser.switch]").items()}
        if switch else None,
        meter_heads={(int(v[0]), int(v[1])): p for p, v in _port_map(mesh, heads, "[power_meter.channels]")
                     .items()} if heads else None,
        transceivers=[{**t, "tx_ports": [mesh.port_index(p) for p in t.get("tx_ports", [])],
                       "rx_ports": [mesh.port_index(p) for p in t.get("rx_ports", [])]} for t in tx]
        if tx is not None else None,
    )


def _limit_in_hardware(driver: HeaterDriver, n_heaters: int, max_current_ma: float) -> None:
    """Set each heater channel's IMAX to the configured limit, so the module itself enforces it.

    The software refuses over-limit settings before sending; the module's own limit also
    holds against a command changed on the line. Only channels whose limit is lower than
    what the module holds are written (none with the default, the Q8iv's full scale).
    """
    for ch in range(n_heaters):
        if driver.max_current_ma[ch] > max_current_ma:
            driver.set_max_current(ch, max_current_ma)


def open_bench(source: str | Path | Mapping[str, Any] | None = None, *, seed: int | None = None,
               heater_map: HeaterMap | None = None, timeout_s: float = 2.0, chip: Any = None,
               verify: str | None = None, heater_clock: Any = None) -> InstrumentBench:
    """Open every instrument of a bench config and wrap them in an :class:`InstrumentBench`.

    ``sim`` addresses start a :class:`~instruments.sim.bench.SimulatedBench` (closed with
    the bench; reachable as ``bench.sim``), around ``chip`` when given. All drivers talk
    over real transports. ``verify`` overrides the config's ``[heater_driver] verify``.
    ``heater_clock`` goes to :func:`start_simulators` (tests: a fault campaign on simulated time).
    """
    cfg = load_config(source)
    mesh = chip.mesh if chip is not None else mesh_from_spec(cfg.get("mesh", "smartlight"))
    lock = BenchLock(shared_addresses(cfg))  # one bench, one writer: before anything is opened
    try:
        sim = start_simulators(cfg, seed, chip, heater_clock) if uses_sim(cfg) else None
    except BaseException:
        lock.release()
        raise
    opened: list[Any] = [lock]
    try:
        addr = sim.addresses() if sim else {}
        h = cfg["heater_driver"]
        link = cfg.get("sim", {}).get("heater_link", "pty")
        haddr = h["address"] if h["address"] != "sim" else \
            addr["heater_driver_url" if link == "url" else "heater_driver"]
        driver = HeaterDriver.open(haddr, baudrate=int(h.get("baudrate", 115200)), timeout_s=timeout_s,
                                   binary=h.get("protocol", DEFAULT_PROTOCOL) == "binary",
                                   verify=verify or h.get("verify", DEFAULT_VERIFY))
        opened.append(driver)
        controller = MeshController(driver, mesh, heater_map,
                                    max_current_ma=float(h.get("max_current_ma", 24.0)),
                                    max_total_power_mw=float(h.get("max_total_power_mw", 1000.0)))
        _limit_in_hardware(driver, mesh.n_heaters, controller.max_current_ma)
        la = cfg["laser"]
        laser = TunableLaser.open(addr["laser"] if la["address"] == "sim" else la["address"],
                                  timeout_s=timeout_s, switch_slot=int(la.get("switch_slot", 1)),
                                  switch_channel=int(la.get("switch_channel", 1)),
                                  switch_outputs=int(la.get("switch_outputs", 64)),
                                  expected_idn=_expected_idn(la, "laser"))
        opened.append(laser)
        pm = cfg["power_meter"]
        meter = PowerMeter.open(addr["power_meter"] if pm["address"] == "sim" else pm["address"],
                                timeout_s=timeout_s, expected_idn=_expected_idn(pm, "power_meter"))
        opened.append(meter)
        if la.get("switch"):
            switch = {p: int(k) for p, k in _port_map(mesh, la["switch"], "[laser.switch]").items()}
        elif sim:
            switch = {p: k for k, p in sim.switch_ports.items()}
        else:
            raise BenchConfigError("[laser.switch] is missing: map each mesh port the laser feeds to its "
                                   "switch output")
        if pm.get("channels"):
            heads = {p: (int(v[0]), int(v[1])) for p, v in
                     _port_map(mesh, pm["channels"], "[power_meter.channels]").items()}
        elif sim:
            heads = {p: sc for sc, p in sim.meter_heads.items()}
        else:
            raise BenchConfigError("[power_meter.channels] is missing: map mesh ports to [slot, channel]")
        modules = {}
        tx_specs = cfg.get("transceivers")
        if tx_specs is None and sim:
            tx_specs = [{"name": n, "address": "sim"} for n in sim.buses]
        for t in tx_specs or []:
            modules[t["name"]] = open_transceiver(t, sim, timeout_s)
            opened.append(modules[t["name"]])
        chip_id = sim.chip.chip_id if sim and h["address"] == "sim" else cfg.get("chip_id")
        if not chip_id:
            raise BenchConfigError("chip_id is missing: name the chip so calibration maps match it")
        bench = InstrumentBench(controller, laser, meter, switch, heads, str(chip_id), transceivers=modules,
                                closers=[lock, sim] if sim else [lock])
        bench.sim = sim
        wired = {s["name"]: s for s in (sim.transceiver_specs if sim else [])}  # sim wiring when not in cfg
        bench.transceiver_ports = {  # which mesh ports each module's lanes face (telemetry maps LOS to links)
            t["name"]: {k: [mesh.port_index(p) for p in (t.get(k) or wired.get(t["name"], {}).get(k, []))]
                        for k in ("tx_ports", "rx_ports")} for t in tx_specs or []}
        return bench
    except BaseException:
        for inst in reversed(opened):
            inst.close()
        if sim:
            sim.close()
        raise


def open_transceiver(spec: Mapping[str, Any], sim: Any = None, timeout_s: float = 1.0) -> TransceiverModule:
    """Open one ``[[transceivers]]`` entry.

    Addresses: ``sim``, ``smbus:<bus>[:<i2c addr>]``, ``serial-i2c:<path>[:<i2c addr>]``.
    """
    name, address = spec.get("name", "transceiver"), str(spec.get("address", "sim"))
    period = spec.get("monitor_period_s")
    if address == "sim":
        if sim is None or name not in sim.buses:
            raise BenchConfigError(f"transceiver {name!r} is 'sim' but no simulated module has that name")
        return TransceiverModule(sim.buses[name], name=name, monitor_period_s=period)
    kind, _, rest = address.partition(":")
    target, _, i2c = rest.rpartition(":") if rest.count(":") and kind == "smbus" else (rest, "", "")
    if kind == "serial-i2c" and rest.rsplit(":", 1)[-1].startswith("0x"):
        target, i2c = rest.rsplit(":", 1)
    i2c_addr = int(i2c, 0) if i2c else MODULE_ADDRESS
    if kind == "smbus":
        return TransceiverModule(SMBusI2C(int(target) if target.isdigit() else target), address=i2c_addr,
                                 name=name, monitor_period_s=period)
    if kind == "serial-i2c":
        bridge = SerialI2CBridge(SerialTransport(target, timeout_s=timeout_s), name=f"{name}-bridge")
        return TransceiverModule(bridge, address=i2c_addr, name=name, monitor_period_s=period)
    raise BenchConfigError(f"transceiver {name!r}: address {address!r} must be sim, smbus:<bus>[:0x50] or "
                           "serial-i2c:<device>[:0x50]")

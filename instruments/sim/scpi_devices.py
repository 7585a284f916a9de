"""Simulated SCPI instruments (laser + fiber switch, power meter) on loopback TCP servers.

Each device is an IEEE 488.2 / SCPI-99 firmware (:mod:`instruments.sim.scpi_parser`)
with the Keysight 8164B / 816x command set (docs/protocol-scpi.md lists every command,
what the real instrument does and what the simulator does). :class:`ScpiServer` serves
one on ``127.0.0.1:<port>`` from threads, reached with pyvisa-py as
``TCPIP::127.0.0.1::<port>::SOCKET``, so PyMeasure's ``KeysightN7776C`` or plain
pyvisa work against it unchanged. The meter reads the chip's circuit solve for the
laser's switch output (mapped to a mesh port), wavelength and power, plus noise: a
-70 dBm floor and 0.5 % of the reading (docs/instruments.md).

Faults (:meth:`ScpiDevice.inject`, at the byte level on the TCP link; the names are the
heater simulator's, so one facade drives both):

* ``drop_before``: the connection drops before the message reaches the firmware (not
  executed, no reply);
* ``drop_within``: the part of the message before its first ``;`` is executed, the rest
  is lost, the connection drops;
* ``drop_after``: executed, then the connection drops before the reply is sent;
* ``delay``: executed; its reply is held back and sent just before the reply to the next
  message (from any connection), i.e. after the client's timeout;
* ``duplicate``: the reply is sent twice;
* ``unsolicited``: a line (``line``, default :data:`UNSOLICITED_LINE`) is sent before the
  reply;
* ``corrupt``: one byte of the reply is changed (seeded; never the ``\\n`` terminator);
* ``corrupt_command``: one byte of the message is changed before the firmware parses it;
* ``reset``: the instrument restarts before executing the message (power-on settings,
  empty error queue, ``*ESE`` 0, PON bit 7 set in the event status register, IEEE 488.2
  §11.5.1.2), then executes it;
* ``reject``: every device setting in the message is refused (not applied, -222 queued);
  queries are answered normally.

The old names ``drop``, ``timeout`` and ``garbage`` are aliases (:data:`FAULT_ALIASES`).
:meth:`SimLaser.drift` shifts the power and wavelength the light really has, unknown to
the laser's own readback.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from instruments.scpi_text import split_outside_quotes
from instruments.sim.chip import Chip
from instruments.sim.faults import KINDS, take_due
from instruments.sim.scpi_parser import (
    ESR_PON,
    LENGTH_M,
    NO_ERROR,
    TIME_S,
    Getter,
    ScpiCore,
    ScpiError,
    Setter,
    boolean,
    check_range,
    integer,
    nr3,
    number,
    power,
)

__all__ = ["DROP", "FAULT_KINDS", "NO_ERROR", "ScpiDevice", "ScpiServer", "SimLaser", "SimPowerMeter"]

DROP = object()
FAULT_KINDS = KINDS
# the first simulator's names: a lost message, a reply after the timeout, a noisy reply
FAULT_ALIASES = {"drop": "drop_before", "timeout": "delay", "garbage": "corrupt"}
UNSOLICITED_LINE = "+9.99E37"  # SCPI's "not a number" value: what a stray measurement line looks like

# The 81600B-class tunable laser of the simulated bench (limits the drivers also declare)
WAVELENGTH_NM = (1490.0, 1640.0)
POWER_DBM = (-10.0, 13.0)
DEFAULT_WAVELENGTH_NM = 1550.0
LOCK_PASSWORD = "1234"  # the 8164B factory password (PyMeasure's KeysightN7776C uses it too)
NOT_SUPPORTED = "wavelength sweeps are not supported by this simulator (CW laser only)"
SWEEP_NODES = ("", "STARt", "STOP", "STEP", "SPEed", "MODE", "REPeat", "CHECkparams", "LLOGging",
               "CYCLes", "DWELl", "STEP NEXT", "STEP PREVious")

# The 816x power meter heads
METER_WAVELENGTH_NM = (800.0, 1700.0)
ATIM_S = (1e-4, 10.0)
RANGE_DBM = (-60.0, 10.0)
RANGE_STEP_DB = 10.0  # the 816x range moves in 10 dB steps; a setting is rounded to one


def _choice(arg: str, table: Mapping[str, float]) -> float | None:
    """MIN/MAX/DEF character data -> its value, else None (a number follows)."""
    return table.get(arg.strip().upper()[:3])


def _flag(on: bool) -> str:
    return "1" if on else "0"


@dataclass
class Fault:
    """A pending fault: ``kind`` fires on the ``after``-th next program message, ``count`` times."""

    kind: str
    after: int = 0
    count: int = 1
    line: str | None = None


class ScpiDevice(ScpiCore):
    """A :class:`ScpiCore` firmware with a lock and injectable byte-level faults.

    Args:
        fault_seed: seed of the generator that picks which byte a ``corrupt`` or
            ``corrupt_command`` fault changes (faults are reproducible).
    """

    def __init__(self, fault_seed: int = 0) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.faults: list[Fault] = []
        self.messages = 0
        self.restarts = 0
        self.fault_rng = np.random.default_rng(fault_seed)
        self._held: list[str] = []  # replies a ``delay`` fault holds back

    @property
    def errors(self) -> list[str]:
        """The error queue (oldest first), for tests."""
        return self.status.errors

    # -- faults -------------------------------------------------------------------------------
    def inject(self, kind: str, *, after: int = 0, count: int = 1, line: str | None = None) -> None:
        """Schedule a fault on the ``after``-th next program message (0 = the next), ``count`` times.

        ``kind`` is one of :data:`FAULT_KINDS` (see the module docstring; ``line`` is the
        text an ``unsolicited`` fault sends, default :data:`UNSOLICITED_LINE`), or one of
        the old names in :data:`FAULT_ALIASES`.
        """
        kind = FAULT_ALIASES.get(kind, kind)
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {FAULT_KINDS}")
        if after < 0 or count < 1:
            raise ValueError(f"after must be >= 0 and count >= 1, not {after} and {count}")
        with self.lock:
            self.faults.append(Fault(kind, after, count, line))

    def clear_faults(self) -> None:
        """Forget pending faults (a reply a ``delay`` already holds is still sent)."""
        with self.lock:
            self.faults.clear()

    def _next_fault(self) -> Fault | None:
        return take_due(self.faults)

    def power_on(self) -> None:
        """Restart: device power-on settings, empty error queue, ``*ESE``/``*SRE`` 0 and PON set.

        IEEE 488.2 §11.5.1.2: the Power-On bit (bit 7) of the Standard Event Status
        Register is set at power-on; with the power-on status clear flag true (the usual
        default) the enable registers and the error queue are cleared.
        """
        self.restarts += 1
        self.status.errors.clear()
        self.status.esr = ESR_PON
        self.status.ese = self.status.sre = 0
        self.power_on_defaults()

    def power_on_defaults(self) -> None:
        """Device settings at power-on (default: as after ``*RST``)."""
        self.reset()

    # -- messages -------------------------------------------------------------------------------
    def respond(self, message: str) -> list[object]:
        """One program message -> what goes out on the link, in order: reply lines (str)
        and possibly :data:`DROP` (the connection closes), all faults applied.
        """
        with self.lock:
            self.messages += 1
            fault = self._next_fault()
            kind = fault.kind if fault else None
            if kind in ("drop_before", "drop_within", "drop_after"):
                self._execute_dropped(message, kind)
                return [DROP]
            if kind == "corrupt_command":
                message = self._corrupt(message.rstrip("\r\n"))
            if kind == "reset":
                self.power_on()
            if kind == "reject":
                self.refuse_settings = True
            try:
                reply = self.execute(message)
            finally:
                self.refuse_settings = False
            out: list[object] = list(self._held)
            self._held = []
            if kind == "unsolicited":
                out.append(fault.line if fault and fault.line is not None else UNSOLICITED_LINE)
            if reply is None:
                return out
            if kind == "delay":
                self._held = [reply]
                return out
            if kind == "corrupt":
                reply = self._corrupt(reply)
            return [*out, reply, reply] if kind == "duplicate" else [*out, reply]

    def handle(self, line: str) -> object:
        """One program message -> its reply lines joined, None (no reply) or :data:`DROP`."""
        out = self.respond(line)
        if DROP in out:
            return DROP
        return "\n".join(str(x) for x in out) if out else None

    def _execute_dropped(self, message: str, kind: str) -> None:
        """A message whose connection drops: nothing, its first unit, or all of it runs."""
        if kind == "drop_within":
            self.execute(split_outside_quotes(message.strip(), ";")[0])
        elif kind == "drop_after":
            self.execute(message)

    def _corrupt(self, text: str) -> str:
        """``text`` with one character (byte) changed to another byte, never the terminator."""
        if not text:
            return text
        k = int(self.fault_rng.integers(len(text)))
        old = ord(text[k])
        choices = [b for b in range(1, 256) if b not in (old, ord("\n"))]
        new = choices[int(self.fault_rng.integers(len(choices)))]
        return text[:k] + chr(new) + text[k + 1:]


class SimLaser(ScpiDevice):
    """8164B mainframe: tunable laser in slot 0, 1xN fiber switch module in ``switch_slot``.

    Args:
        switch_outputs: number of switch outputs (``ROUT<slot>:CHAN1 A,<k>``, k = 1..N).
        switch_slot: the switch module's slot.
    """

    idn = "Keysight Technologies,8164B,LUMION-SIM-0001,V5.25(lumion-sim)"
    # 8164B programming guide: a missing slot number is the lowest one, 0 on the 8164B
    suffix_defaults = {"src": 0, "chan": 1, "trig": 0, "rout": 0, "rchan": 1}  # noqa: RUF012

    def __init__(self, switch_outputs: int = 64, switch_slot: int = 1, *, fault_seed: int = 0) -> None:
        super().__init__(fault_seed=fault_seed)
        self.switch_outputs = switch_outputs
        self.switch_slot = switch_slot
        self.drift_db = 0.0
        self.drift_nm = 0.0
        self.locked = False
        self.reset()
        self.output_on = True  # powered up with the output on, as a bench laser is left
        src = "[SOURce#src] [CHANnel#chan]"
        for wav in ("WAVelength [CW]", "WAVelength FIXed"):
            self.add(f"{src} {wav}", set=self._set_wav, query=self._get_wav, query_args=(0, 1))
        self.add(f"{src} POWer [LEVel] [IMMediate] [AMPLitude]", set=self._set_pow, query=self._get_pow,
                 query_args=(0, 1))
        self.add(f"{src} POWer UNIT", set=self._set_unit, query=self._get_unit)
        self.add(f"{src} POWer STATe", set=self._set_stat, query=self._get_stat)
        self.add("LOCK", set=self._set_lock, query=lambda _i, _a: _flag(self.locked), set_args=(2, 2))
        self.add("ROUTe#rout [CHANnel#rchan]", set=self._set_switch, query=self._get_switch,
                 set_args=(2, 2))
        for node in SWEEP_NODES:
            self.add(f"{src} WAVelength SWEep {node}", set=self._sweep, query=self._sweep,
                     set_args=(0, 4), query_args=(0, 4))
        for spec in (f"{src} READout DATA", f"{src} READout POINts", "TRIGger#trig OUTPut",
                     "TRIGger#trig INPut"):
            self.add(spec, set=self._sweep, query=self._sweep, set_args=(0, 4), query_args=(0, 4))

    def reset(self) -> None:
        """``*RST``: 1550 nm, 0 dBm, unit dBm, output off, switch at output 1."""
        self.wavelength_nm = DEFAULT_WAVELENGTH_NM
        self.power_dbm = 0.0
        self.power_unit = "DBM"
        self.output_on = False
        self.switch_output = 1

    # -- handlers ----------------------------------------------------------------------------
    def _laser(self, ids: Mapping[str, int]) -> None:
        if ids["src"] != 0 or ids["chan"] != 1:
            raise ScpiError(-114, f"no laser at slot {ids['src']} channel {ids['chan']} (it is SOUR0:CHAN1)")

    def _set_wav(self, ids: dict[str, int], args: list[str]) -> None:
        self._laser(ids)
        low, high = WAVELENGTH_NM
        nm = _choice(args[0], {"MIN": low, "MAX": high, "DEF": DEFAULT_WAVELENGTH_NM})
        if nm is None:
            nm = number(args[0], LENGTH_M) * 1e9  # no suffix: metres
        self.wavelength_nm = check_range(nm, low, high, "wavelength", " nm")

    def _get_wav(self, ids: dict[str, int], args: list[str]) -> str:
        self._laser(ids)
        low, high = WAVELENGTH_NM
        nm = _choice(args[0], {"MIN": low, "MAX": high, "DEF": DEFAULT_WAVELENGTH_NM}) if args else \
            self.wavelength_nm
        if nm is None:
            raise ScpiError(-224, f"{args[0]!r}: use MIN or MAX or DEF")
        return nr3(nm * 1e-9)

    def _set_pow(self, ids: dict[str, int], args: list[str]) -> None:
        self._laser(ids)
        low, high = POWER_DBM
        dbm = _choice(args[0], {"MIN": low, "MAX": high, "DEF": 0.0})
        if dbm is None:
            value, unit = power(args[0], self.power_unit)
            if unit == "W":
                if value <= 0:
                    raise ScpiError(-222, f"power {value:g} W must be positive")
                dbm = 10 * np.log10(value * 1e3)
            else:
                dbm = value
        self.power_dbm = check_range(float(dbm), low, high, "power", " dBm")

    def _get_pow(self, ids: dict[str, int], args: list[str]) -> str:
        self._laser(ids)
        low, high = POWER_DBM
        dbm = _choice(args[0], {"MIN": low, "MAX": high, "DEF": 0.0}) if args else self.power_dbm
        if dbm is None:
            raise ScpiError(-224, f"{args[0]!r}: use MIN or MAX or DEF")
        return nr3(dbm if self.power_unit == "DBM" else 10 ** (dbm / 10) * 1e-3)

    def _set_unit(self, ids: dict[str, int], args: list[str]) -> None:
        self._laser(ids)
        self.power_unit = _unit(args[0])

    def _get_unit(self, ids: dict[str, int], _args: list[str]) -> str:
        self._laser(ids)
        return "+0" if self.power_unit == "DBM" else "+1"

    def _set_stat(self, ids: dict[str, int], args: list[str]) -> None:
        self._laser(ids)
        on = boolean(args[0])
        if on and self.locked:
            raise ScpiError(-221, "the instrument is locked: unlock it first (:LOCK 0 and the password)")
        self.output_on = on

    def _get_stat(self, ids: dict[str, int], _args: list[str]) -> str:
        self._laser(ids)
        return _flag(self.output_on)

    def _set_lock(self, _ids: dict[str, int], args: list[str]) -> None:
        if args[1].strip().strip("\"'") != LOCK_PASSWORD:
            raise ScpiError(-224, "wrong lock password")
        self.locked = boolean(args[0])
        if self.locked:
            self.output_on = False  # locking switches every laser off

    def _switch(self, ids: Mapping[str, int]) -> None:
        if ids["rout"] != self.switch_slot or ids["rchan"] != 1:
            raise ScpiError(-114, f"no switch at slot {ids['rout']} channel {ids['rchan']} (it is "
                                  f"ROUT{self.switch_slot}:CHAN1)")

    def _set_switch(self, ids: dict[str, int], args: list[str]) -> None:
        self._switch(ids)
        if args[0].strip().upper() != "A":
            raise ScpiError(-224, f"switch input {args[0]!r}: this 1xN switch has input A only")
        k = integer(args[1])
        self.switch_output = int(check_range(k, 1, self.switch_outputs, "switch output"))

    def _get_switch(self, ids: dict[str, int], _args: list[str]) -> str:
        self._switch(ids)
        return f"A,{self.switch_output}"

    def _sweep(self, _ids: dict[str, int], _args: list[str]) -> str:
        raise ScpiError(-200, NOT_SUPPORTED)

    # -- physics -------------------------------------------------------------------------------
    def drift(self, power_db: float = 0.0, wavelength_nm: float = 0.0) -> None:
        """Fault: the real output moves by ``power_db`` / ``wavelength_nm``; readback does not."""
        with self.lock:
            self.drift_db, self.drift_nm = power_db, wavelength_nm

    def light(self) -> tuple[int, float, float]:
        """(switch output, true wavelength nm, true power mW; 0 when off)."""
        with self.lock:
            mw = 10 ** ((self.power_dbm + self.drift_db) / 10) if self.output_on else 0.0
            return self.switch_output, self.wavelength_nm + self.drift_nm, mw


def _unit(arg: str) -> str:
    """Power unit program data: DBM|0 or W|WATT|1 (8164B / 816x ``POW:UNIT``)."""
    word = arg.strip().upper()
    if word in ("DBM", "0"):
        return "DBM"
    if word in ("W", "WATT", "1"):
        return "W"
    raise ScpiError(-224, f"power unit {arg.strip()!r}: use DBM|0 or W|1")


class SimPowerMeter(ScpiDevice):
    """816x-style meter: heads (slot, chan) sit at mesh ports and read the chip's solve.

    Args:
        chip: the shared chip.
        laser: where the light comes from.
        heads: (slot, chan) -> mesh port index.
        switch_ports: laser switch output -> mesh port index.
        seed: noise seed.
    """

    idn = "Keysight Technologies,N7744C,LUMION-SIM-0002,V1.0(lumion-sim)"
    suffix_defaults = {"slot": 1, "chan": 1}  # noqa: RUF012 -- lowest slot / channel

    def __init__(self, chip: Chip, laser: SimLaser, heads: Mapping[tuple[int, int], int],
                 switch_ports: Mapping[int, int], *, seed: int = 0, noise_floor_dbm: float = -70.0,
                 noise_fraction: float = 0.005) -> None:
        super().__init__(fault_seed=seed)
        chip.follow_wall_clock()  # served over a wire: its clients wait by sleeping
        from photonics.kernel_loader import kernels

        # Ready when it exists, as a real meter after power-on: on a checkout whose circuit
        # kernels are not compiled yet (a fresh clone, a kernel change) the first reading would
        # compile them (a minute or more) inside a client's 1 s timeout.
        kernels()
        self.chip, self.laser = chip, laser
        self.heads = dict(heads)
        self.switch_ports = dict(switch_ports)
        self.floor_mw = 10 ** (noise_floor_dbm / 10)
        self.noise_fraction = noise_fraction
        self.rng = np.random.default_rng(seed)
        self.settings: dict[tuple[int, int], dict[str, float]] = {}
        self.stored: dict[tuple[int, int], float] = {}  # INIT's reading (mW) for FETC
        head = "[CHANnel#chan]"
        sens = f"SENSe#slot {head} POWer"
        self.add(f"{sens} WAVelength", set=self._setter("wav", self._wav), query=self._getter("wav"))
        self.add(f"{sens} ATIMe", set=self._setter("atim", self._atim), query=self._getter("atim"))
        self.add(f"{sens} RANGe [UPPer]", set=self._setter("rang", self._range), query=self._getter("rang"))
        self.add(f"{sens} RANGe AUTO", set=self._setter("auto", lambda a: float(boolean(a))),
                 query=lambda i, _a: _flag(bool(self._head(i)["auto"])))
        self.add(f"{sens} UNIT", set=self._setter("unit", lambda a: float(_unit(a) == "W")),
                 query=lambda i, _a: "+1" if self._head(i)["unit"] else "+0")
        self.add(f"READ#slot {head} [SCALar] POWer [DC]", query=self._read)
        self.add(f"FETCh#slot {head} [SCALar] POWer [DC]", query=self._fetch)
        self.add(f"INITiate#slot {head} [IMMediate]", set=self._init, set_args=(0, 0))
        self.add(f"INITiate#slot {head} CONTinuous", set=self._setter("cont", lambda a: float(boolean(a))),
                 query=lambda i, _a: _flag(bool(self._head(i)["cont"])))

    def reset(self) -> None:
        """``*RST``: every head back to its defaults."""
        self.settings = {}
        self.stored = {}

    # -- settings --------------------------------------------------------------------------------
    def _head(self, ids: Mapping[str, int]) -> dict[str, float]:
        key = (ids["slot"], ids["chan"])
        if key not in self.heads:
            raise ScpiError(-114, f"no power meter head at slot {key[0]} channel {key[1]}")
        # power-on defaults: 1550 nm, 10 ms, auto range, readings in W, not continuous
        return self.settings.setdefault(key, {"wav": 1550e-9, "atim": 0.01, "rang": 0.0, "auto": 1.0,
                                              "unit": 1.0, "cont": 0.0})

    def _setter(self, what: str, convert: Callable[[str], float]) -> Setter:
        def fn(ids: dict[str, int], args: list[str]) -> None:
            head = self._head(ids)  # the head must exist before the value is judged
            head[what] = convert(args[0])
        return fn

    def _getter(self, what: str) -> Getter:
        return lambda ids, _args: nr3(self._head(ids)[what])

    @staticmethod
    def _wav(arg: str) -> float:
        m = number(arg, LENGTH_M)  # no suffix: metres
        return check_range(m * 1e9, *METER_WAVELENGTH_NM, "wavelength", " nm") * 1e-9

    @staticmethod
    def _atim(arg: str) -> float:
        return check_range(number(arg, TIME_S), *ATIM_S, "averaging time", " s")

    @staticmethod
    def _range(arg: str) -> float:
        dbm = check_range(number(arg, {"DBM": 1.0}), *RANGE_DBM, "range", " dBm")
        return RANGE_STEP_DB * round(dbm / RANGE_STEP_DB)

    # -- readings ----------------------------------------------------------------------------------
    def true_power_mw(self, slot: int, chan: int) -> float:
        """Noise-free power at a head (mW)."""
        out, wl, mw = self.laser.light()
        port = self.switch_ports.get(out)
        if port is None or mw == 0.0:
            return 0.0
        return float(self.chip.output_power_mw(port, wl, mw)[self.heads[(slot, chan)]])

    def _measure_mw(self, ids: Mapping[str, int]) -> float:
        mw = self.true_power_mw(ids["slot"], ids["chan"])
        noisy = mw * (1 + self.noise_fraction * self.rng.standard_normal())
        return abs(noisy + self.floor_mw * self.rng.standard_normal())

    def _format(self, head: Mapping[str, float], mw: float) -> str:
        return nr3(mw * 1e-3) if head["unit"] else nr3(10 * np.log10(max(mw, 1e-12)))

    def _read(self, ids: dict[str, int], _args: list[str]) -> str:
        """``READ?`` = ``INIT`` + ``FETC?`` (PG): the reading is also kept for ``FETC?``."""
        head = self._head(ids)
        self.stored[(ids["slot"], ids["chan"])] = mw = self._measure_mw(ids)
        return self._format(head, mw)

    def _init(self, ids: dict[str, int], _args: list[str]) -> None:
        self._head(ids)
        self.stored[(ids["slot"], ids["chan"])] = self._measure_mw(ids)

    def _fetch(self, ids: dict[str, int], _args: list[str]) -> str:
        head = self._head(ids)
        if head["cont"]:
            return self._format(head, self._measure_mw(ids))
        key = (ids["slot"], ids["chan"])
        if key not in self.stored:
            raise ScpiError(-230, "no reading yet: send INIT first")
        return self._format(head, self.stored[key])


class ScpiServer:
    """Serve a :class:`ScpiDevice` on ``host:port`` (port 0 picks a free one) from threads."""

    def __init__(self, device: ScpiDevice, host: str = "127.0.0.1", port: int = 0) -> None:
        self.device = device
        self._clients: set[socket.socket] = set()
        # guards the clients and counts; notified when a count moves (await_handled waits on it)
        self._clients_lock = threading.Condition()
        # per client port: [messages handled, lines written]; see connection_counts
        self._counts: dict[int, list[int]] = {}
        self._closed: set[int] = set()  # client ports whose connection the server has ended
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def handle(self) -> None:
                with owner._clients_lock:
                    owner._clients.add(self.connection)
                port = self.client_address[1]
                owner.forget_connection(port)  # before its first message is counted
                try:
                    for raw in self.rfile:
                        out = owner.device.respond(raw.decode("latin-1"))
                        lines = 0
                        for item in out:
                            if item is DROP:
                                break
                            self.wfile.write((str(item) + "\n").encode("latin-1", "replace"))
                            lines += 1
                        owner._count(port, lines)  # after the writes: a counted line is on the wire
                        if DROP in out:
                            return
                except OSError:
                    return
                finally:
                    with owner._clients_lock:
                        owner._clients.discard(self.connection)
                        owner._closed.add(port)
                        owner._clients_lock.notify_all()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            # handle_request() polls the socket without waiting: the loop below calls it only once
            # select says a connection is waiting, and one that vanished before accept() must not
            # leave it blocked where close()'s wake-up cannot reach it.
            timeout = 0

        self._server = Server((host, port), Handler)
        self.host, self.port = self._server.server_address[:2]
        self._wake_r, self._wake_w = os.pipe()  # close() writes a byte here: the accept loop ends
        self._stopped = False
        self._thread = threading.Thread(target=self._accept_until_closed, name=f"lumion-scpi-{self.port}",
                                        daemon=True)
        self._thread.start()

    def _accept_until_closed(self) -> None:
        """Accept connections (each served from its own thread) until :meth:`close` wakes the loop.

        socketserver's ``serve_forever`` notices a shutdown only at its next poll (every 50 ms
        here), so every close of a simulated bench's laser and meter waited ~25 ms each on
        average (issue 29); this loop sleeps in ``select`` on the socket and the wake pipe.
        """
        with selectors.DefaultSelector() as sel:
            sel.register(self._server, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not any(key.fileobj == self._wake_r for key, _ in sel.select()):
                self._server.handle_request()  # accepts the waiting connection (timeout 0: never blocks)

    def _count(self, port: int, lines: int) -> None:
        with self._clients_lock:
            counts = self._counts.setdefault(port, [0, 0])
            counts[0] += 1
            counts[1] += lines
            self._clients_lock.notify_all()

    def forget_connection(self, client_port: int) -> None:
        """Start the counts of ``client_port`` afresh: a port the OS gives out again is a new connection."""
        with self._clients_lock:
            self._counts.pop(client_port, None)
            self._closed.discard(client_port)

    def connection_counts(self, client_port: int) -> tuple[int, int, bool]:
        """``(messages handled, reply lines written, ended)`` of the connection from ``client_port``.

        A message counts once its reply lines are written (or its connection dropped), so a
        client that sent ``n`` messages and read ``m`` lines knows, once the first number is
        ``n`` or the server has ended the connection, that nothing more is coming when the
        second is ``m`` (:mod:`instruments.sim.reply_oracle`).
        """
        with self._clients_lock:
            handled, lines = self._counts.get(client_port, (0, 0))
            return handled, lines, client_port in self._closed

    def await_handled(self, client_port: int, sent: int, timeout_s: float) -> tuple[int, int, bool]:
        """:meth:`connection_counts` once the connection from ``client_port`` has handled ``sent``
        messages or has ended, or when ``timeout_s`` has passed: woken by the count itself, not
        by polling it (issue 29).
        """
        deadline = time.monotonic() + timeout_s
        with self._clients_lock:
            while True:
                handled, lines = self._counts.get(client_port, (0, 0))
                ended = client_port in self._closed
                left = deadline - time.monotonic()
                if handled >= sent or ended or left <= 0:
                    return handled, lines, ended
                self._clients_lock.wait(left)

    @property
    def resource(self) -> str:
        """The pyvisa-py resource string."""
        return f"TCPIP::{self.host}::{self.port}::SOCKET"

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop accepting, drop every client, join the thread (again: nothing to do)."""
        with self._clients_lock:
            if self._stopped:
                return
            self._stopped = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout_s)
        self._server.server_close()
        with self._clients_lock:
            for c in list(self._clients):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
        if not self._thread.is_alive():  # the loop is done with the pipe
            os.close(self._wake_r)
            os.close(self._wake_w)

"""Simulated SCPI instruments (laser + fiber switch, power meter) on loopback TCP servers.

Each device is a line-in, line-out firmware; :class:`ScpiServer` serves one on
``127.0.0.1:<port>`` from threads, reached with pyvisa-py as
``TCPIP::127.0.0.1::<port>::SOCKET``. The meter reads the chip's circuit solve for the
laser's switch output (mapped to a mesh port), wavelength and power, plus noise: a
-70 dBm floor and 0.5 % of the reading (DESIGN.md).

Faults (:meth:`ScpiDevice.inject`): ``timeout`` (no reply), ``garbage`` (noise reply),
``drop`` (the server closes the connection); :meth:`SimLaser.drift` shifts the power and
wavelength the light really has, unknown to the laser's own readback.
"""

from __future__ import annotations

import contextlib
import re
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping

import numpy as np

from instruments.sim.chip import Chip

DROP = object()
NO_ERROR = '+0,"No error"'


class ScpiDevice:
    """Firmware base: an error queue, ``*IDN?``/``*RST``/``*CLS``/``*OPC?``/``SYST:ERR?``, faults."""

    idn = "LUMION,SIM,0,0.1"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.faults: list[str] = []
        self.commands = 0
        self.handlers: list[tuple[re.Pattern[str], Callable[..., str | None]]] = [
            (re.compile(r"^\*IDN\?$"), lambda: self.idn),
            (re.compile(r"^\*RST$"), self._reset),
            (re.compile(r"^\*CLS$"), self._cls),
            (re.compile(r"^\*OPC\?$"), lambda: "1"),
            (re.compile(r"^SYST(?:EM)?:ERR(?:OR)?\?$"), self._next_error),
        ]

    def inject(self, kind: str, count: int = 1) -> None:
        """Make the next ``count`` messages misbehave: ``timeout``, ``garbage`` or ``drop``."""
        if kind not in ("timeout", "garbage", "drop"):
            raise ValueError(f"unknown fault {kind!r}")
        with self.lock:
            self.faults += [kind] * count

    def _next_error(self) -> str:
        return self.errors.pop(0) if self.errors else NO_ERROR

    def _reset(self) -> None:
        self.errors.clear()

    def _cls(self) -> None:
        self.errors.clear()

    def handle(self, line: str) -> object:
        """One message -> reply text, None (no reply) or :data:`DROP`."""
        with self.lock:
            self.commands += 1
            fault = self.faults.pop(0) if self.faults else None
            if fault == "drop":
                return DROP
            if fault == "timeout":
                return None
            cmd = line.strip()
            for pattern, fn in self.handlers:
                m = pattern.match(cmd)
                if m:
                    try:
                        reply = fn(*m.groups())
                    except ValueError:
                        self.errors.append('-222,"Data out of range"')
                        reply = None
                    break
            else:
                self.errors.append('-113,"Undefined header"')
                reply = None
            if fault == "garbage" and reply is not None:
                return "\x8f#?~"
            return reply


def _num(text: str, unit: str) -> float:
    return float(text.upper().removesuffix(unit))


class SimLaser(ScpiDevice):
    """81600B-style tunable laser (slot 0) with a 1xN fiber switch module (slot 1)."""

    idn = "Keysight Technologies,8164B-SIM,LUMION0001,V1.0 (TLS 81600B, switch 81595B)"

    def __init__(self, switch_outputs: int = 64) -> None:
        super().__init__()
        self.switch_outputs = switch_outputs
        self._reset()
        self.drift_db = 0.0
        self.drift_nm = 0.0
        n = r"([-+0-9.eE]+)"
        self.handlers += [
            (re.compile(rf"^SOUR0:WAV {n}NM$"), self._set_wav),
            (re.compile(r"^SOUR0:WAV\?$"), lambda: f"{self.wavelength_nm * 1e-9:.8E}"),
            (re.compile(rf"^SOUR0:POW {n}DBM$"), self._set_pow),
            (re.compile(r"^SOUR0:POW\?$"), lambda: f"{self.power_dbm:+.8E}"),
            (re.compile(r"^SOUR0:POW:STAT ([01])$"), self._set_stat),
            (re.compile(r"^SOUR0:POW:STAT\?$"), lambda: "1" if self.output_on else "0"),
            (re.compile(r"^ROUT1:CHAN1 A,(\d+)$"), self._set_switch),
            (re.compile(r"^ROUT1:CHAN1\?$"), lambda: f"A,{self.switch_output}"),
        ]

    def _reset(self) -> None:
        super()._reset()
        self.wavelength_nm = 1550.0
        self.power_dbm = 0.0
        self.output_on = True  # a bench laser left on; *RST on real units turns it off
        self.switch_output = 1

    def _set_wav(self, v: str) -> None:
        x = float(v)
        if not 1490 <= x <= 1640:
            raise ValueError
        self.wavelength_nm = x

    def _set_pow(self, v: str) -> None:
        x = float(v)
        if not -10 <= x <= 13:
            raise ValueError
        self.power_dbm = x

    def _set_stat(self, v: str) -> None:
        self.output_on = v == "1"

    def _set_switch(self, k: str) -> None:
        if not 1 <= int(k) <= self.switch_outputs:
            raise ValueError
        self.switch_output = int(k)

    def drift(self, power_db: float = 0.0, wavelength_nm: float = 0.0) -> None:
        """Fault: the real output moves by ``power_db`` / ``wavelength_nm``; readback does not."""
        with self.lock:
            self.drift_db, self.drift_nm = power_db, wavelength_nm

    def light(self) -> tuple[int, float, float]:
        """(switch output, true wavelength nm, true power mW; 0 when off)."""
        with self.lock:
            mw = 10 ** ((self.power_dbm + self.drift_db) / 10) if self.output_on else 0.0
            return self.switch_output, self.wavelength_nm + self.drift_nm, mw


class SimPowerMeter(ScpiDevice):
    """816x-style meter: heads (slot, chan) sit at mesh ports and read the chip's solve.

    Args:
        chip: the shared chip.
        laser: where the light comes from.
        heads: (slot, chan) -> mesh port index.
        switch_ports: laser switch output -> mesh port index.
        seed: noise seed.
    """

    idn = "Keysight Technologies,N7744C-SIM,LUMION0002,V1.0"

    def __init__(self, chip: Chip, laser: SimLaser, heads: Mapping[tuple[int, int], int],
                 switch_ports: Mapping[int, int], *, seed: int = 0, noise_floor_dbm: float = -70.0,
                 noise_fraction: float = 0.005) -> None:
        super().__init__()
        self.chip, self.laser = chip, laser
        self.heads = dict(heads)
        self.switch_ports = dict(switch_ports)
        self.floor_mw = 10 ** (noise_floor_dbm / 10)
        self.noise_fraction = noise_fraction
        self.rng = np.random.default_rng(seed)
        self.settings: dict[tuple[int, int], dict[str, float]] = {}
        h = r"SENS(\d+):CHAN(\d+):POW"
        n = r"([-+0-9.eE]+)"
        self.handlers += [
            (re.compile(rf"^{h}:WAV {n}NM$"), lambda s, c, v: self._set(s, c, "wav", v, 800, 1700)),
            (re.compile(rf"^{h}:WAV\?$"), lambda s, c: f"{self._get(s, c)['wav'] * 1e-9:.8E}"),
            (re.compile(rf"^{h}:ATIM {n}S$"), lambda s, c, v: self._set(s, c, "atim", v, 1e-4, 10)),
            (re.compile(rf"^{h}:ATIM\?$"), lambda s, c: f"{self._get(s, c)['atim']:+.8E}"),
            (re.compile(rf"^{h}:RANG {n}DBM$"), lambda s, c, v: self._set(s, c, "rang", v, -60, 10)),
            (re.compile(rf"^{h}:RANG\?$"), lambda s, c: f"{self._get(s, c)['rang']:+.8E}"),
            (re.compile(rf"^{h}:RANG:AUTO ([01])$"), lambda s, c, v: self._set(s, c, "auto", v, 0, 1)),
            (re.compile(rf"^{h}:RANG:AUTO\?$"), lambda s, c: str(int(self._get(s, c)["auto"]))),
            (re.compile(rf"^{h}:UNIT ([01])$"), lambda s, c, v: self._set(s, c, "unit", v, 0, 1)),
            (re.compile(rf"^{h}:UNIT\?$"), lambda s, c: str(int(self._get(s, c)["unit"]))),
            (re.compile(r"^READ(\d+):CHAN(\d+):POW\?$"), self._read),
        ]

    def _get(self, slot: str, chan: str) -> dict[str, float]:
        key = (int(slot), int(chan))
        if key not in self.heads:
            raise ValueError
        return self.settings.setdefault(key, {"wav": 1550.0, "atim": 0.01, "rang": 0.0, "auto": 1,
                                              "unit": 1})

    def _set(self, slot: str, chan: str, what: str, value: str, low: float, high: float) -> None:
        x = float(value)
        if not low <= x <= high:
            raise ValueError
        self._get(slot, chan)[what] = x

    def true_power_mw(self, slot: int, chan: int) -> float:
        """Noise-free power at a head (mW)."""
        out, wl, mw = self.laser.light()
        port = self.switch_ports.get(out)
        if port is None or mw == 0.0:
            return 0.0
        return float(self.chip.output_power_mw(port, wl, mw)[self.heads[(slot, chan)]])

    def _read(self, slot: str, chan: str) -> str:
        s = self._get(slot, chan)
        mw = self.true_power_mw(int(slot), int(chan))
        noisy = mw * (1 + self.noise_fraction * self.rng.standard_normal())
        noisy = abs(noisy + self.floor_mw * self.rng.standard_normal())
        if s["unit"]:
            return f"{noisy * 1e-3:+.8E}"
        return f"{10 * np.log10(max(noisy, 1e-12)):+.8E}"


class ScpiServer:
    """Serve a :class:`ScpiDevice` on ``host:port`` (port 0 picks a free one) from threads."""

    def __init__(self, device: ScpiDevice, host: str = "127.0.0.1", port: int = 0) -> None:
        self.device = device
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def handle(self) -> None:
                with owner._clients_lock:
                    owner._clients.add(self.connection)
                try:
                    for raw in self.rfile:
                        reply = owner.device.handle(raw.decode("ascii", "replace"))
                        if reply is DROP:
                            return
                        if reply is not None:
                            self.wfile.write((str(reply) + "\n").encode("latin-1"))
                except OSError:
                    return
                finally:
                    with owner._clients_lock:
                        owner._clients.discard(self.connection)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, port), Handler)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"lumion-scpi-{self.port}", daemon=True)
        self._thread.start()

    @property
    def resource(self) -> str:
        """The pyvisa-py resource string."""
        return f"TCPIP::{self.host}::{self.port}::SOCKET"

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop accepting, drop every client, join the thread."""
        self._server.shutdown()
        self._server.server_close()
        with self._clients_lock:
            for c in list(self._clients):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
        self._thread.join(timeout_s)

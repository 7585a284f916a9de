"""The Qontrol wire protocol, as the vendor's own library (PyPI ``qontrol`` 1.1.20) speaks it.

Pure data and functions, no I/O: the module types and their full scales, the error
table, reply formats, and the binary frame encoder. The heater driver uses them; the
simulated module (:mod:`instruments.sim.heater_device`) decodes frames on its own, so a
mistake here is caught by the vendor library's tests against the simulator.

ASCII (115200 8N1, ``\\n``): ``<CMD><ch><op><value>`` with ``op`` ``=`` or ``?``; sets
answer ``OK``, queries a value with its unit (``+1.2500 mA``, ``+0.3100 V``), any command
may answer ``E<code>:<ch>`` (:data:`ERRORS`). Vector sets are ``IVEC<first>=v,v,...`` per
module; ``IALL?``/``VALL?`` answer one line per channel over the whole daisy chain.

Binary: ``header, command, address (3 bytes), data``. The header is ``1 BCAST ALLCH
ADDM RW ACT DEXT P`` with ``P`` making the byte's parity even; data is one big-endian
uint16 (value = physical / full scale * 0xFFFF), or with DEXT a uint16 word count and
that many words. Replies are the same ASCII lines as in ASCII mode.

Example:
    >>> binary_frame(CMD_CODES["I"], 5, 0x8000).hex()
    '81010000058000'
    >>> parse_error("E02:05")
    (2, 5)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# type -> (channels, full-scale current mA, full-scale voltage V); qontrol.DEVICE_PROPERTIES
MODULE_TYPES: dict[str, tuple[int, float, float]] = {
    "Q8iv": (8, 24.0, 12.0),
    "Q8a": (8, 100.0, 12.0),
    "Q8b": (8, 83.333333, 12.0),
    "Q8bi": (8, 100.0, 12.0),
}

# Command codes of the binary protocol (qontrol.CMD_CODES, the subset a heater driver uses)
CMD_CODES: dict[str, int] = {"V": 0x00, "I": 0x01, "VMAX": 0x02, "IMAX": 0x03,
                             "VFULL": 0x20, "IFULL": 0x21, "NCHAN": 0x22, "ID": 0x24}
CMD_NAMES: dict[int, str] = {code: name for name, code in CMD_CODES.items()}

# Error codes (qontrol.COMMON_ERRORS and Qx_ERRORS)
ERRORS: dict[int, str] = {
    0: "unknown error", 1: "over-voltage", 2: "over-current", 3: "power error",
    4: "calibration error", 5: "output error", 10: "unrecognised command",
    11: "unrecognised input parameter", 12: "unrecognised channel", 13: "operation forbidden",
    14: "serial buffer overflow", 15: "serial communication error", 16: "command timed out",
    17: "SPI error", 18: "ADC error", 19: "I2C error",
    30: "too many errors, some have been suppressed", 31: "firmware trap", 90: "powered up",
}
E_OVER_VOLTAGE, E_OVER_CURRENT = 1, 2
E_UNKNOWN_COMMAND, E_BAD_PARAMETER, E_BAD_CHANNEL = 10, 11, 12
# The command was lost on the line (buffer overflow, framing error, firmware time-out): the
# vendor library resends it, and so do we (every command we send is idempotent).
RESEND_CODES = frozenset({14, 15, 16})
# Reports a module sends about itself, not answers to a command: suppressed errors, a trap
REPORT_CODES = frozenset({30, 31})
E_POWERED_UP = 90  # unsolicited: the module (re)started, every output is back at zero

FULL_WORD = 0xFFFF  # binary data words are fractions of full scale in 1/65535 steps
ACK = "\x06"  # some firmware prefixes OK with an ASCII ACK; recorded in vendor transcripts

_ERROR = re.compile(r"^[A-Za-z]{1,3}(\d+):(\d+)$")  # qontrol.ERROR_FORMAT, anchored
_DEVICE_ID = re.compile(r"^(Q[0-9A-Za-z]+)-([0-9A-Fa-f*]+)$")
_CHAIN_LINE = re.compile(r"^(Q[0-9A-Za-z]+-[0-9A-Fa-f*]+)\s*:\s*(\d+)$")
_VALUE = re.compile(r"^([+-]?\d+(?:\.\d*)?)\s*(mA|V)$")


@dataclass(frozen=True)
class Module:
    """One module of the daisy chain.

    Attributes:
        device_id: ``Q8iv-00A1`` style id (type, hex serial).
        index: position in the chain (0 = the module on the host's cable).
        first: first global channel number of this module.
        n_channels: channels on the module.
        i_full_ma, v_full_v: full-scale current (mA) and voltage (V).
    """

    device_id: str
    index: int
    first: int
    n_channels: int
    i_full_ma: float
    v_full_v: float

    @property
    def type(self) -> str:
        """The module type (``Q8iv``)."""
        return self.device_id.split("-", 1)[0]


def parse_error(line: str) -> tuple[int, int] | None:
    """``(code, channel)`` when ``line`` is an error report, else None."""
    m = _ERROR.match(line.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_device_id(line: str) -> tuple[str, str] | None:
    """``(type, serial)`` of an ``id?`` reply such as ``Q8iv-00A1``, else None."""
    m = _DEVICE_ID.match(line.strip())
    return (m.group(1), m.group(2)) if m else None


def parse_chain_line(line: str) -> tuple[str, int] | None:
    """``(device_id, index)`` of one ``NUPALL?`` line such as ``Q8iv-00A1: 0``, else None."""
    m = _CHAIN_LINE.match(line.strip())
    return (m.group(1), int(m.group(2))) if m else None


def parse_value(line: str, unit: str) -> float | None:
    """The number of a ``+1.2500 mA`` / ``+0.3100 V`` reply in ``unit``, else None."""
    m = _VALUE.match(line.strip())
    if not m or m.group(2) != unit:
        return None
    return float(m.group(1))


def build_chain(entries: Sequence[tuple[str, int]]) -> list[Module]:
    """Modules from ``NUPALL?`` entries, ordered by index, with global channel numbers.

    Raises:
        ValueError: an unknown module type or a gap in the indices.
    """
    modules: list[Module] = []
    first = 0
    for k, (device_id, index) in enumerate(sorted(entries, key=lambda e: e[1])):
        if index != k:
            raise ValueError(f"daisy chain indices are not 0..{len(entries) - 1}: {entries}")
        kind = device_id.split("-", 1)[0]
        if kind not in MODULE_TYPES:
            raise ValueError(f"module {device_id} is of type {kind!r}, not one of {sorted(MODULE_TYPES)}")
        n, i_full, v_full = MODULE_TYPES[kind]
        modules.append(Module(device_id, index, first, n, i_full, v_full))
        first += n
    return modules


def header_byte(*, read: bool = False, all_channels: bool = False, extended: bool = False) -> int:
    """The binary header: ``1 BCAST ALLCH ADDM RW ACT DEXT P`` with even parity."""
    byte = 0x80 | (0x20 if all_channels else 0) | (0x08 if read else 0) | (0x02 if extended else 0)
    return byte | (bin(byte).count("1") & 1)


def to_word(value: float, full_scale: float) -> int:
    """A physical value as a data word (rounded to the nearest step, 0..0xFFFF)."""
    return max(0, min(FULL_WORD, round(value / full_scale * FULL_WORD)))


def from_word(word: int, full_scale: float) -> float:
    """The physical value a data word stands for."""
    return word * full_scale / FULL_WORD


def binary_frame(command: int, channel: int, data: int | Sequence[int], *, read: bool = False,
                 all_channels: bool = False) -> bytes:
    """One binary command: a single word, or a vector (DEXT) when ``data`` is a sequence.

    Example:
        >>> binary_frame(CMD_CODES["I"], 8, [0, 0xFFFF]).hex()
        '820100000800020000ffff'
    """
    extended = not isinstance(data, int)
    words = list(data) if extended else [data]  # type: ignore[arg-type]
    out = bytearray([header_byte(read=read, all_channels=all_channels, extended=extended), command,
                     0, channel >> 8 & 0xFF, channel & 0xFF])
    if extended:
        out += len(words).to_bytes(2, "big")
    for w in words:
        out += int(w).to_bytes(2, "big")
    return bytes(out)

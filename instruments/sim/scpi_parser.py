"""IEEE 488.2 / SCPI-99 message handling for the simulated instruments.

What a real SCPI instrument's parser does, in one small engine (:class:`ScpiCore`):

* a *program message* is a line of *message units* separated by ``;``; a header is
  case-insensitive, each node in its short (``SOUR``) or long (``SOURce``) form and
  nothing in between, optional nodes may be left out (``[:SOURce[n]]``), a numeric
  suffix may follow a node (``SENS2``; a missing one takes the instrument's default);
* a header starting with ``:`` is absolute; otherwise it continues the *current path*
  (the previous header minus its last node; SCPI-99 vol. 1 §6.2.4), which is reset to
  the root at the start of every message; common commands (``*CLS``) leave it alone;
* numbers may carry a unit suffix after optional whitespace (``1550NM``, ``1 mW``),
  numbers without one are in the default unit;
* only queries (headers ending in ``?``) reply; the replies of one message are joined
  with ``;`` into one response line (IEEE 488.2 §8.4);
* every failure goes to the error queue (``SYST:ERR?`` drains it to ``+0,"No error"``)
  and sets its bit in the Standard Event Status Register; a command error (-1xx) drops
  the rest of the message (the parser cannot trust what follows), an execution error
  (-2xx) only its own unit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from instruments.scpi_text import split_outside_quotes

ERRORS = {  # SCPI-99 vol. 2 §21.8 standard error numbers and texts
    -100: "Command error", -102: "Syntax error", -104: "Data type error",
    -108: "Parameter not allowed", -109: "Missing parameter", -113: "Undefined header",
    -114: "Header suffix out of range", -131: "Invalid suffix", -200: "Execution error",
    -221: "Settings conflict", -222: "Data out of range", -224: "Illegal parameter value",
    -230: "Data corrupt or stale", -350: "Queue overflow",
}
NO_ERROR = '+0,"No error"'
QUEUE_SIZE = 30  # entries; typical of Keysight instruments (-350 replaces the last one when full)

# Standard Event Status Register bits (IEEE 488.2 §11.5.1)
ESR_OPC, ESR_QYE, ESR_DDE, ESR_EXE, ESR_CME, ESR_PON = 1, 4, 8, 16, 32, 128
# Status Byte bits (IEEE 488.2 §11.2; SCPI-99 uses bit 2 for "error queue not empty")
STB_EAV, STB_ESB, STB_MSS = 4, 32, 64

LENGTH_M = {"PM": 1e-12, "NM": 1e-9, "UM": 1e-6, "MM": 1e-3, "M": 1.0}
TIME_S = {"PS": 1e-12, "NS": 1e-9, "US": 1e-6, "MS": 1e-3, "S": 1.0}
POWER_W = {"PW": 1e-12, "NW": 1e-9, "UW": 1e-6, "MW": 1e-3, "W": 1.0, "WATT": 1.0}

_NUMBER = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)$")
_HEADER = re.compile(r"^(?:\*[A-Za-z]+\??|:?[A-Za-z]+\d*(?::[A-Za-z]+\d*)*\??)$")
_UNIT = re.compile(r"^(\S*)(\s+)?(.*)$", re.S)  # header, whitespace, parameters
_TOKEN = re.compile(r"^([A-Za-z]+)(\d*)$")
_NODE = re.compile(r"^(\[)?([A-Z]+)([a-z]*)(?:#(\w+))?(\])?$")


class ScpiError(Exception):
    """A failure that goes to the error queue: standard ``code`` plus device-specific detail."""

    def __init__(self, code: int, detail: str = "") -> None:
        super().__init__(code, detail)
        self.code = code
        self.detail = detail

    def entry(self) -> str:
        """The ``SYST:ERR?`` reply: ``-222,"Data out of range;wavelength 1400 nm ..."``."""
        # the detail must not end the quoted string, nor split it for clients that cut the
        # reply at "," (PyMeasure's check_errors) or at ";" (the message-unit separator)
        detail = self.detail.replace('"', "'").replace(";", " ").replace(",", " ")
        text = ERRORS.get(self.code, "Error") + (f";{detail}" if detail else "")
        return f'{self.code:+d},"{text}"'


# -- headers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    """One header node: long and short form (upper case), optional, numeric-suffix name."""

    long: str
    short: str
    optional: bool
    suffix: str | None


def compile_header(spec: str) -> tuple[Node, ...]:
    """``"[SOURce#src] [CHANnel#chan] WAVelength"`` -> nodes (capitals = short form)."""
    nodes = []
    for part in spec.split():
        m = _NODE.match(part)
        if not m or bool(m.group(1)) != bool(m.group(5)):
            raise ValueError(f"bad header spec node {part!r}")
        short = m.group(2)
        nodes.append(Node((short + m.group(3)).upper(), short, bool(m.group(1)), m.group(4)))
    return tuple(nodes)


def match_header(nodes: Sequence[Node], tokens: Sequence[tuple[str, str]]) -> dict[str, int] | None:
    """Suffix values when ``tokens`` (upper-case name, digits) spell ``nodes``; else None."""
    if not nodes:
        return {} if not tokens else None
    node, rest = nodes[0], nodes[1:]
    if tokens:
        name, digits = tokens[0]
        if name in (node.long, node.short) and (node.suffix or not digits):
            got = match_header(rest, tokens[1:])
            if got is not None:
                if node.suffix and digits:
                    got[node.suffix] = int(digits)
                return got
    return match_header(rest, tokens) if node.optional else None


# -- parameters --------------------------------------------------------------------------
def number(arg: str, units: Mapping[str, float] | None = None, default_scale: float = 1.0) -> float:
    """Decimal numeric program data with an optional suffix -> value in the base unit.

    Raises -104 when ``arg`` is not a number, -131 when its suffix is not one of ``units``.
    """
    m = _NUMBER.match(arg.strip())
    if not m:
        raise ScpiError(-104, f"expected a number but got {arg.strip()!r}")
    value, suffix = float(m.group(1)), m.group(2).upper()
    if not suffix:
        return value * default_scale
    if not units or suffix not in units:
        raise ScpiError(-131, f"{m.group(2)!r} is not a unit here")
    return value * units[suffix]


def power(arg: str, default_unit: str) -> tuple[float, str]:
    """A power with optional DBM / W-family suffix -> (value, ``"DBM"`` or ``"W"``)."""
    m = _NUMBER.match(arg.strip())
    suffix = m.group(2).upper() if m else ""
    if suffix == "DBM":
        return number(arg, {"DBM": 1.0}), "DBM"
    if suffix:
        return number(arg, POWER_W), "W"
    return number(arg), default_unit


def boolean(arg: str) -> bool:
    """Boolean program data: ON/OFF or a number (rounded; non-zero is true, IEEE 488.2 §7.7.2)."""
    word = arg.strip().upper()
    if word in ("ON", "OFF"):
        return word == "ON"
    return round(number(arg)) != 0


def integer(arg: str) -> int:
    """A number rounded to an integer (IEEE 488.2 rounds numeric data where integers are needed)."""
    return round(number(arg))


def check_range(value: float, low: float, high: float, what: str, unit: str = "") -> float:
    """``value`` or -222 Data out of range."""
    if not low <= value <= high:
        raise ScpiError(-222, f"{what} {value:g}{unit} outside {low:g}..{high:g}{unit}")
    return value


def nr3(x: float) -> str:
    """Keysight-style NR3 number: ``+1.55000000E-006``."""
    mantissa, exp = f"{x:+.8E}".split("E")
    return f"{mantissa}E{int(exp):+04d}"


# -- the engine ----------------------------------------------------------------------------
Setter = Callable[[dict[str, int], list[str]], None]
Getter = Callable[[dict[str, int], list[str]], str]


@dataclass
class Command:
    """A header with its setting and/or query handler and how many parameters each takes."""

    nodes: tuple[Node, ...]
    set: Setter | None = None
    query: Getter | None = None
    set_args: tuple[int, int] = (1, 1)
    query_args: tuple[int, int] = (0, 0)


@dataclass
class _Status:
    esr: int = 0
    ese: int = 0
    sre: int = 0
    errors: list[str] = field(default_factory=list)


class ScpiCore:
    """Error queue, status registers, common commands and a command tree.

    Subclasses register their commands with :meth:`add` and say which numeric suffix a
    missing one means in :attr:`suffix_defaults`.
    """

    idn = "LUMION,SIM,0,0.1"
    suffix_defaults: Mapping[str, int] = {}

    def __init__(self) -> None:
        self.status = _Status()
        self.commands: list[Command] = []
        self.refuse_settings = False  # fault injection: device settings answer -222, not applied
        self.add("SYSTem ERRor [NEXT]", query=lambda _i, _a: self.next_error())
        self.add("SYSTem ERRor COUNt", query=lambda _i, _a: str(len(self.status.errors)))

    def add(self, spec: str, *, set: Setter | None = None, query: Getter | None = None,
            set_args: tuple[int, int] = (1, 1), query_args: tuple[int, int] = (0, 0)) -> None:
        """Register a header (see :func:`compile_header`) with its handlers."""
        self.commands.append(Command(compile_header(spec), set, query, set_args, query_args))

    # -- error queue -----------------------------------------------------------------------
    def push_error(self, error: ScpiError) -> None:
        """Queue an error and set its ESR bit; a full queue ends in -350 (SCPI-99 §21.8.1)."""
        self.status.esr |= _esr_bit(error.code)
        q = self.status.errors
        if len(q) < QUEUE_SIZE:
            q.append(error.entry())
        else:
            q[-1] = ScpiError(-350).entry()

    def next_error(self) -> str:
        """Pop the oldest error, or ``+0,"No error"``."""
        return self.status.errors.pop(0) if self.status.errors else NO_ERROR

    def stb(self) -> int:
        """Status byte: error queue not empty, event summary, master summary."""
        s = self.status
        value = (STB_EAV if s.errors else 0) | (STB_ESB if s.esr & s.ese else 0)
        return value | (STB_MSS if value & s.sre else 0)

    # -- device hooks ------------------------------------------------------------------------
    def reset(self) -> None:
        """``*RST``: device settings to their defaults (not the status or the error queue)."""

    # -- execution ---------------------------------------------------------------------------
    def execute(self, message: str) -> str | None:
        """Run one program message; the joined query responses, or None when nothing replies."""
        replies: list[str] = []
        path: list[tuple[str, str]] = []
        for unit in split_outside_quotes(message.strip(), ";"):
            if not unit.strip():
                continue  # an empty unit (trailing ";") is harmless
            try:
                reply, path = self._unit(unit.strip(), path)
            except ScpiError as err:
                self.push_error(err)
                if _error_class(err.code) == -1:
                    break  # command error: the parser cannot trust the rest of the message
                continue
            if reply is not None:
                replies.append(reply)
        return ";".join(replies) if replies else None

    def _unit(self, unit: str, path: list[tuple[str, str]]) -> tuple[str | None, list[tuple[str, str]]]:
        header, _, rest = _UNIT.match(unit).groups("")  # type: ignore[union-attr] -- always matches
        if not _HEADER.match(header):
            raise ScpiError(-102, f"bad header {header!r}")
        args = [a.strip() for a in split_outside_quotes(rest, ",")] if rest.strip() else []
        is_query = header.endswith("?")
        name = header.rstrip("?")
        if name.startswith("*"):
            return self._common(name.upper(), is_query, args), path
        tokens = [_token(t) for t in name.lstrip(":").split(":")]
        full = tokens if name.startswith(":") else path + tokens
        cmd, ids = self._lookup(full)
        handler = cmd.query if is_query else cmd.set
        if handler is None:
            raise ScpiError(-113, f"{header} is {'set' if cmd.set else 'query'}-only")
        if self.refuse_settings and not is_query:
            raise ScpiError(-222, "setting refused (injected fault)")
        low, high = cmd.query_args if is_query else cmd.set_args
        _check_count(args, low, high)
        return handler(ids, args), full[:-1]

    def _lookup(self, tokens: list[tuple[str, str]]) -> tuple[Command, dict[str, int]]:
        for cmd in self.commands:
            ids = match_header(cmd.nodes, tokens)
            if ids is not None:
                for node in cmd.nodes:
                    if node.suffix and node.suffix not in ids:
                        ids[node.suffix] = self.suffix_defaults.get(node.suffix, 1)
                return cmd, ids
        raise ScpiError(-113, ":".join(n + d for n, d in tokens))

    def _common(self, name: str, is_query: bool, args: list[str]) -> str | None:
        s = self.status
        table: dict[tuple[str, bool], tuple[int, Callable[[], str | None]]] = {
            ("*IDN", True): (0, lambda: self.idn),
            ("*OPC", True): (0, lambda: "1"),  # every operation here completes at once
            ("*OPC", False): (0, lambda: self._set_esr(ESR_OPC)),
            ("*WAI", False): (0, lambda: None),
            ("*CLS", False): (0, self._cls),
            ("*RST", False): (0, self.reset),
            ("*TST", True): (0, lambda: "0"),
            ("*ESR", True): (0, self._read_esr),
            ("*ESE", True): (0, lambda: str(s.ese)),
            ("*ESE", False): (1, lambda: self._set_mask("ese", args[0])),
            ("*SRE", True): (0, lambda: str(s.sre)),
            ("*SRE", False): (1, lambda: self._set_mask("sre", args[0])),
            ("*STB", True): (0, lambda: str(self.stb())),
        }
        if (name, is_query) not in table:
            raise ScpiError(-113, name + ("?" if is_query else ""))
        n, fn = table[(name, is_query)]
        _check_count(args, n, n)
        return fn()

    def _cls(self) -> None:
        self.status.errors.clear()
        self.status.esr = 0

    def _set_esr(self, bit: int) -> None:
        self.status.esr |= bit

    def _read_esr(self) -> str:
        value, self.status.esr = self.status.esr, 0
        return str(value)

    def _set_mask(self, which: str, arg: str) -> None:
        setattr(self.status, which, int(check_range(integer(arg), 0, 255, f"*{which.upper()} mask")))


def _error_class(code: int) -> int:
    """-1 for -1xx command errors, -2 for -2xx execution errors, ... (0 for device codes)."""
    return -((-code) // 100) if code < 0 else 0


def _esr_bit(code: int) -> int:
    return {-1: ESR_CME, -2: ESR_EXE, -3: ESR_DDE, -4: ESR_QYE}.get(_error_class(code), ESR_DDE)


def _token(text: str) -> tuple[str, str]:
    m = _TOKEN.match(text)
    if not m:
        raise ScpiError(-102, f"bad header node {text!r}")
    return m.group(1).upper(), m.group(2)


def _check_count(args: Sequence[Any], low: int, high: int) -> None:
    if len(args) > high:
        raise ScpiError(-108, f"expected at most {high} parameter(s) but got {len(args)}")
    if len(args) < low or any(not a for a in args):
        raise ScpiError(-109, f"expected {low} parameter(s)")

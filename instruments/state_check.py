"""Verify a programmed heater state by light: each input lit, every output read, compared with
the powers the synthesis predicted.

Shared by ``lumion program`` (lab_scripts.state_verify prints it) and the control plane's
``POST /api/v1/states`` (controlplane.states). After a heater state is set, the bench laser
is switched into each input port the state's prediction names
(``photonics.synthesis.prediction``), at each of the prediction's wavelengths (a filter: its
centre and a point on its slope each side), and every power meter head but the lit port's is
read. Each reading, as a fraction of the laser's power, is compared with ``|V_pq|^2`` the
synthesis predicted on the chip model it was refined on (for a state synthesised with
``--map``: the calibrated chip).
A port off by more than :data:`STATE_TOL` of the input's power makes the input ``off``
(``lumion program`` exits 5 naming every such port and its error; the service restores the
chip and answers ``mismatch``). A state without a
prediction is checked against the map's own model of it (``"prediction": "map"``), lit into
every port the laser feeds.

A check by light sees only what light shows: one arm of a TBU off by pi may move no checked
port by much (a TBU whose two outputs carry nearly equal light, or whose error the following
interference undoes). Before it is trusted, every TBU the state uses is tried on the map's
model of the chip: a pi error on each of its arms, at the inputs lit, the ports metered and the
wavelengths checked (:func:`photonics.synthesis.prediction.pi_error_changes`). An arm whose pi
error moves no reading by more than :data:`PI_VISIBLE` is named ``not verifiable by light``,
and the check's status is then ``unverified`` (verified except those), never ``ok``.

Light predicted at a port with no meter head cannot be confirmed: above the tolerance, that
input is ``unverified`` (named, never ``ok``). The simulated meter reads the chip's own output
(no facet losses), as in ``lab_scripts.program_verify``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from instruments.dark_source import dark_readings, laser_off
from instruments.light_meter import VERIFY_NM

# How far (fraction of the input's power) a port's measured power may be from the prediction.
# A phase-calibrated map's residual (calibration target 0.02 rad RMS per heater) moves a port's
# power by up to ~0.03 of the input (docs/synthesis.md, "Measured" table 3: the 1:2:3:4 splitter's
# worst share error at 0.02 rad); measured through maps calibrated by light on 5 seeded chips
# (3x3 unitaries, Mach-Zehnder and ring filters): at most 0.020. One used TBU's arm off by pi
# moved some port by 0.051 or more (median 0.32-0.41; all 140 cases caught, the closest just over
# the line), a state synthesised through another chip's map by 0.26-0.90
# (benchmarks/bench_program_state.py).
STATE_TOL = 0.05
# The worst |measured - predicted| a right state read, through maps calibrated by light on 5
# seeded chips (the measurement above, benchmarks/bench_program_state.py): a reading may be this
# far off before any error is added.
RIGHT_STATE_WORST = 0.020
# A pi error on one arm is surely caught only when the model says it moves some checked reading
# by more than the tolerance plus what a right state's reading may already be off (the two can
# cancel); an arm whose largest change is at or below this is named not verifiable by light.
PI_VISIBLE = STATE_TOL + RIGHT_STATE_WORST
ARMS = ("top", "bottom")
# Ports shown in the report: those the prediction or the meter puts at least this fraction of
# the input's power into (the rest hold noise and crosstalk), and every port off.
SHOWN_FLOOR = 1e-3
DEFAULT_LASER_DBM = 0.0  # a bench whose laser reports no power: the route check's assumption too


@dataclass(frozen=True)
class PortReading:
    """One output port lit from one input (fractions of the input's power)."""

    port: str
    predicted: float
    measured: float

    @property
    def difference(self) -> float:
        """Measured minus predicted."""
        return self.measured - self.predicted

    def to_dict(self) -> dict[str, Any]:
        """JSON form (to 1e-4 of the input's power)."""
        return {"port": self.port, "predicted": round(self.predicted, 4), "measured": round(self.measured, 4),
                "difference": round(self.difference, 4)}


@dataclass(frozen=True)
class InputResult:
    """The check of one lit input at one wavelength: its status, its worst port and the ports shown."""

    port: str
    wavelength_nm: float
    status: str  # "ok", "off" or "unverified"
    reason: str
    worst: PortReading | None
    off: tuple[PortReading, ...]
    shown: tuple[PortReading, ...]
    predicted_total: float
    measured_total: float | None
    brightest: float | None = None  # the brightest metered port (fraction of the input's power; not in JSON)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"port": self.port, "wavelength_nm": self.wavelength_nm, "status": self.status,
                "reason": self.reason,
                "worst": None if self.worst is None else self.worst.to_dict(),
                "off_ports": [r.port for r in self.off],
                "predicted_total": round(self.predicted_total, 4),
                "measured_total": None if self.measured_total is None else round(self.measured_total, 4),
                "ports": [r.to_dict() for r in self.shown]}


def judge_input(name: str, wavelength_nm: float, names: list[str], predicted: np.ndarray,
                measured: np.ndarray, unmetered: dict[str, float], tol: float = STATE_TOL) -> InputResult:
    """Compare one input's readings at one wavelength (fractions of its power, one per metered
    port ``names``) with the prediction; ``unmetered``: predicted power at ports without a meter head.
    """
    readings = [PortReading(n, float(p), float(m))
                for n, p, m in zip(names, predicted, measured, strict=True)]
    off = tuple(r for r in readings if abs(r.difference) > tol)
    worst = max(readings, key=lambda r: abs(r.difference)) if readings else None
    shown = tuple(r for r in readings if max(r.predicted, r.measured) >= SHOWN_FLOOR or r in off)
    blind = {p: x for p, x in unmetered.items() if x > tol}
    if off:
        status, reason = "off", ""
    elif not readings or blind:
        status = "unverified"
        reason = ("no power meter head at any other port" if not readings else
                  "no power meter head at " + ", ".join(f"{p} (predicted {x:.3f} of the input)"
                                                        for p, x in blind.items()))
    else:
        status, reason = "ok", ""
    total = float(predicted.sum() + sum(unmetered.values()))
    measured_total = float(measured.sum()) if readings else None
    brightest = float(np.max(measured)) if readings else None
    return InputResult(name, wavelength_nm, status, reason, worst, off, shown, total, measured_total,
                       brightest)


def laser_mw(bench: Any) -> float:
    """The laser's output power (mW), read from it (0 dBm when it reports none)."""
    dbm = getattr(bench.laser, "power_dbm", None)
    return 10 ** ((DEFAULT_LASER_DBM if dbm is None else float(dbm)) / 10)


def check_input(bench: Any, port: int, predicted: np.ndarray, wavelength_nm: float, input_mw: float,
                tol: float = STATE_TOL) -> InputResult:
    """Light ``port`` and read every other metered port; ``predicted``: (n_ports,) power fractions."""
    mesh = bench.mesh
    name = mesh.port_names[port]
    if getattr(bench, "laser", None) is None or port not in getattr(bench, "switch_outputs", {}):
        why = f"no laser switch output feeds {name}"
        return InputResult(name, wavelength_nm, "unverified", why, None, (), (), float(predicted.sum()), None)
    heads = [p for p in sorted(getattr(bench, "meter_channels", {})) if p != port]
    unmetered = {mesh.port_names[p]: float(predicted[p]) for p in range(mesh.n_ports)
                 if p != port and p not in heads}
    measured = np.zeros(0)
    if heads:
        bench.select_input(port, wavelength_nm)
        measured = 10 ** (np.asarray(bench.read_powers_dbm(heads), dtype=float) / 10) / input_mw
    return judge_input(name, wavelength_nm, [mesh.port_names[p] for p in heads], predicted[heads], measured,
                       unmetered, tol)


def verify_state(bench: Any, inputs: tuple[int, ...], powers: np.ndarray, wavelengths_nm: tuple[float, ...],
                 tol: float = STATE_TOL) -> list[InputResult]:
    """Check every input of a programmed state at every wavelength (``powers``: (n_wavelengths,
    n_ports, n_inputs) predicted); wavelength by wavelength, so the laser retunes once for each.
    """
    input_mw = laser_mw(bench) if getattr(bench, "laser", None) is not None else 1.0
    return [check_input(bench, q, powers[i, :, k], wl, input_mw, tol)
            for i, wl in enumerate(wavelengths_nm) for k, q in enumerate(inputs)]


@dataclass(frozen=True)
class BlindArm:
    """A used TBU's arm whose pi error the check by light could not see."""

    tbu: str
    arm: str  # "top" or "bottom"
    largest_change: float  # the largest reading a pi error on it moves (fraction of the input's power)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"tbu": self.tbu, "arm": self.arm, "largest_change": round(self.largest_change, 4)}


def blind_arms(bench: Any, program: Any, heater_map: Any, inputs: tuple[int, ...],
               wavelengths_nm: tuple[float, ...]) -> list[BlindArm]:
    """The arms of the state's TBUs whose pi error moves no reading of this check (``inputs`` the
    laser feeds, every metered port but the lit one, ``wavelengths_nm``) by more than
    :data:`PI_VISIBLE`, on the map's model of the chip.
    """
    from photonics.synthesis import chip_model
    from photonics.synthesis.prediction import pi_error_changes

    mesh = bench.mesh
    lit = tuple(q for q in inputs if getattr(bench, "laser", None) is not None
                and q in getattr(bench, "switch_outputs", {}))
    metered = tuple(sorted(getattr(bench, "meter_channels", {})))
    tbus = program.used_tbus(mesh.n_tbus)
    model = chip_model(mesh, heater_map.delta, heater_map.common)
    change = pi_error_changes(mesh, program.state, model, lit, wavelengths_nm, tbus, metered)
    return [BlindArm(mesh.tbu_names[t], ARMS[a], float(change[i, a]))
            for i, t in enumerate(tbus) for a in range(2) if change[i, a] <= PI_VISIBLE]


Expected = tuple[tuple[int, ...], np.ndarray, tuple[float, ...], str]


def expected(bench: Any, program: Any, heater_map: Any) -> Expected:
    """(inputs, predicted powers, wavelengths nm, source): the state's own prediction, or the map's
    model of the state at :data:`VERIFY_NM`, lit into every port the laser feeds, when the file
    carries none.
    """
    if program.prediction is not None:
        p = program.prediction
        return p.inputs, p.powers, p.wavelengths_nm, "synthesis"
    from photonics.synthesis import chip_model
    from photonics.synthesis.prediction import predicted_powers

    mesh = bench.mesh
    inputs = tuple(sorted(getattr(bench, "switch_outputs", {}))) or tuple(range(mesh.n_ports))
    model = chip_model(mesh, heater_map.delta, heater_map.common)
    return inputs, predicted_powers(mesh, program.state, model, inputs, [VERIFY_NM]), (VERIFY_NM,), "map"


def state_verification(bench: Any, program: Any, heater_map: Any, skip: bool) -> dict[str, Any]:
    """The ``verification`` object of ``lumion program --json`` for a heater state (``check``:
    ``state``; ``status``: ok, off, unverified, skipped).
    """
    head = {"check": "state", "tolerance": STATE_TOL, "pi_visible": PI_VISIBLE,
            "chip": program.prediction.chip if program.prediction is not None else "the map's model"}
    if skip:
        return {"status": "skipped", **head, "prediction": None, "wavelengths_nm": [], "inputs": [],
                "not_verifiable": []}
    inputs, powers, wl, source = expected(bench, program, heater_map)
    off = laser_off(bench)
    results = [] if off else verify_state(bench, inputs, powers, wl)  # nothing sent: nothing judged
    dark = off or state_dark(bench, results)
    blind = blind_arms(bench, program, heater_map, inputs, wl)
    status = "off" if dark or any(r.status == "off" for r in results) else \
        "unverified" if any(r.status == "unverified" for r in results) or not results or blind else "ok"
    return {"status": status, **head, "prediction": source, "wavelengths_nm": list(wl),
            "inputs": [r.to_dict() for r in results], "not_verifiable": [b.to_dict() for b in blind],
            "dark": dark or None}


def state_dark(bench: Any, results: list[InputResult]) -> str:
    """Why no input lit sent light (:mod:`instruments.dark_source`), '' when some head saw it.
    One input lit: the TBU at its port could absorb it too, and is named.
    """
    lit = [r for r in results if r.brightest is not None]
    input_mw = laser_mw(bench) if getattr(bench, "laser", None) is not None else 1.0
    brightest = [10 * math.log10(max(r.brightest, 1e-30) * input_mw) for r in lit]
    mesh = bench.mesh
    ports = {r.port for r in lit}
    at_port = [mesh.tbu_names[int(mesh.port_tbu_ports[mesh.port_index(p)]) // 4] for p in ports]
    common = at_port if len(at_port) == 1 else []
    return dark_readings(brightest, 10 * math.log10(input_mw), common)

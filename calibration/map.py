"""The fitted calibration map: per-TBU passive differential phase, per-heater curves, crosstalk K.

A :class:`CalibrationMap` implements :class:`calibration.heater_map.HeaterMap`: it turns a
:class:`~photonics.configuration.Configuration` (per-TBU cross fractions) into heater
currents, compensating thermal crosstalk with a bounded least-squares solve.

Phase model of the map (rad; currents in mA, heat in mW)::

    s_h(I)   = rho2_h I^2 + rho3_h I^3                  own (self) phase of heater h
    arm_h    = alpha_h + s_h + sum_j K[h, j] s_j / eta_j  crosstalk: K rad/mW, heat s_j/eta_j
    theta_t  = arm_top(t) - arm_bot(t)                     TBU t's differential phase

``delta_t = alpha_top - alpha_bot`` is what the fringe fits give: a single TBU's power
readings cannot show a common arm phase, and bar, cross and every split depend on the
differential only. A map may also hold each TBU's common phase ``common_t`` (rad, the
mean of its two arms' passive phases, up to what no power reading shows), measured by
interference (:mod:`calibration.common_phase`): a unitary or a filter needs it. A map
without it is *power-only* (:attr:`CalibrationMap.common` is None).

JSON form (schema ``lumion.calibration``, version 4; versions 1-3 are still read, as
power-only maps),
written atomically::

    {"schema": "lumion.calibration", "version": 2, "chip_id": "...", "created": ISO-8601,
     "mesh": {"kind": "hexagonal", "rows": 3, "cols": 6, "n_tbus": 71, "n_heaters": 142},
     "tbus": [{"name": "tbu:0.0.0", "delta_rad": ..., "sigma_delta_rad": ...,
               "common_rad": ... (version 4, phase-calibrated maps; null: light cannot tell)},
              {"name": "tbu:0.0.1", ..., "failed": "dead"},
              {"name": "tbu:0.0.2", ..., "failed": "unverified", "disagreement_rad": 3.1,
               "unverified_reason": "disagrees"},
              {"name": "tbu:0.0.3", ..., "failed": "open-heater"}, ...],
     "heaters": [{"channel": 0, "rho2": ..., "rho3": ..., "eta_rad_per_mw": ...,
                  "sigma_phase_2pi_rad": ..., "rms_residual": ...}, ...,
                 {"channel": 7, ..., "fault": "open-heater"}, ...],
     "crosstalk": {"nearest_fraction": ..., "cutoff_tbu": ..., "entries": [[i, j, K], ...]},
     "quality": {...}}
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import lsq_linear

from calibration.heater_map import UnreachableError, invert_cubic
from calibration.model import max_self_phase, self_phase
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.configuration import Configuration
from photonics.errors import LumionError
from photonics.topology import Mesh, atomic_write_text

# Upper bound (rad) for a failed TBU's heater in the bounded solve: it stays undriven (a
# strictly positive bound keeps lsq_linear's lb < ub).
UNDRIVEN_BOUND_RAD = 1e-12
# Up to this many TBUs the crosstalk-compensated currents are solved densely by bounded-variable
# least squares (scipy's BVLS: an exact least-squares solve per change of the active bounds):
# on a smartlight map 2-7 ms where the sparse trust-region solver (trf + lsmr, kept above it)
# took 40-120 ms when bounds were active, the currents agreeing within 2e-13 rad of self-phase
# (session 39). A dense n x n solve grows as n^3: at 400 TBUs it is still ~10 ms.
DENSE_COMPENSATION_MAX_TBUS = 400
SCHEMA = "lumion.calibration"
# Version 2 added the "unverified" failure state (and its ``disagreement_rad``): a version 1
# reader would refuse such a map with a message about the state; the version says it first.
# Version 3 added the heater faults the electrical read-back finds ("open-heater",
# "shorted-heater": a TBU's ``failed`` and its heater's ``fault``), for the same reason.
# Version 4 added each TBU's common phase ("common_rad", calibration.common_phase): a
# version 3 reader would drop it silently and program a unitary from a power-only model.
SCHEMA_VERSION = 4
READ_VERSIONS = (1, 2, 3, 4)
POWER_ONLY = ("is power-only (no common phases: made before version 4 or without "
              "`lumion calibrate --common-phase`); a unitary or filter programmed through it will "
              "not be the one asked: calibrate the common phases")
TWO_PI = 2 * np.pi


class CalibrationError(LumionError):
    """A calibration map or procedure cannot be used: wrong chip, bad file, failed fit."""


class CalibrationRefusedError(CalibrationError):
    """The chip was measured, but light says no map of it can be trusted as it is now (it
    drifted during the run, moved under the map, or its crosstalk is not what the model
    describes): not a bad input, a chip to stabilise or check before calibrating again.
    """


# Physically plausible coefficients (docs/calibration.md, "The map file"). The nominal heater
# has rho2 = 0.60 rad/mA^2 and eta = 2.4 rad/mW; these bounds are ~30x wider than any
# fabrication spread, so only a damaged or absurd map trips them.
# How a TBU can fail: the first three as photonics.routing takes failed TBUs; "unverified"
# (its fit disagrees with an independent light measurement) is avoided by routing as "dead".
ROUTING_STATES = ("dead", "bar", "cross")
# A heater the electrical check found open or shorted (calibration.electrical): its TBU is
# never driven and is avoided by routing as "dead" (it sits at its unknown passive split).
HEATER_FAULT_STATES = ("open-heater", "shorted-heater")
FAILURE_STATES = (*ROUTING_STATES, "unverified", *HEATER_FAULT_STATES)
# Why light left a TBU unverified (a TBU entry's "unverified_reason"; calibration.confirm
# .unverified_reason): no light path avoiding the failed and doubtful TBUs reached it (it was
# not looked at: nothing says it is dark), a lit path showed no fringe through it (it, or the
# path, may be dark), or light measured a disagreement with its fit (``disagreement_rad``).
# A user acts on each differently, and the refusal of `lumion program` names which. Maps
# before session 39 do not record it (a null disagreement is then either of the first two):
# an older reader ignores the key and says as much as it could before, so no version bump.
NO_LIGHT_PATH, NO_FRINGE, DISAGREES = "no-light-path", "no-fringe", "disagrees"
UNVERIFIED_REASONS = (NO_LIGHT_PATH, NO_FRINGE, DISAGREES)
# A passive differential phase is a phase of one turn; the fit reports it in [0, 2 pi) and
# drift tracking moves it by fractions of a radian. Beyond a few turns it is no phase at all
# (at 1e300 rad one float step is more than a turn): the map is damaged.
MAX_DELTA_RAD = 4 * np.pi
RHO2_RANGE = (0.01, 20.0)  # rad/mA^2: 2 pi needs between ~0.6 mA and ~25 mA
TEMPCO_RANGE = (-0.2, 1.0)  # rho3 / rho2 (1/mA): the resistance's current coefficient
ETA_RANGE = (0.05, 100.0)  # rad/mW: pi needs between 0.03 mW and 60 mW
MAX_CROSSTALK_FRACTION = 0.5  # a neighbour never feels more than half a heater's own phase


class NonFiniteError(ValueError):
    """A map value is missing (JSON null), NaN or infinite."""


def _number(value: Any, what: str) -> float:
    """``value`` as a finite float, or :class:`NonFiniteError` naming ``what``."""
    if value is None or isinstance(value, bool):
        raise NonFiniteError(f"{what} is not a finite number ({json.dumps(value)})")
    x = float(value)
    if not math.isfinite(x):
        raise NonFiniteError(f"{what} is not a finite number ({value})")
    return x


def heater_label(h: int, names: tuple[str, ...] | list[str]) -> str:
    """A heater by the TBU it belongs to: ``"tbu:0.1.2 bottom heater (channel 5)"``."""
    arm = "top" if h % 2 == 0 else "bottom"
    tbu = names[h // 2] if h // 2 < len(names) else f"tbu #{h // 2}"
    return f"{tbu} {arm} heater (channel {h})"


def implausible_coefficients(rho2: np.ndarray, rho3: np.ndarray, eta: np.ndarray,
                             entries: np.ndarray, names: tuple[str, ...] | list[str] = ()) -> str | None:
    """Describe the first coefficient outside the plausible ranges above, or None (heaters
    named by their TBU's name from ``names``).
    """
    checks = [
        (rho2, (rho2 < RHO2_RANGE[0]) | (rho2 > RHO2_RANGE[1]), "rho2", f"{RHO2_RANGE} rad/mA^2"),
        (rho3, (rho3 < TEMPCO_RANGE[0] * rho2) | (rho3 > TEMPCO_RANGE[1] * rho2), "rho3",
         f"{TEMPCO_RANGE} x rho2 per mA"),
        (eta, (eta < ETA_RANGE[0]) | (eta > ETA_RANGE[1]), "eta_rad_per_mw", f"{ETA_RANGE} rad/mW"),
    ]
    for values, bad, name, allowed in checks:
        if bad.any():
            h = int(np.argmax(bad))
            return f"{heater_label(h, names)} {name} = {values[h]:.6g} (allowed {allowed})"
    if len(entries):
        j = entries[:, 1].astype(int)
        frac = np.abs(entries[:, 2]) / eta[j]
        if (frac > MAX_CROSSTALK_FRACTION).any():
            k = int(np.argmax(frac))
            return (f"crosstalk on {heater_label(int(entries[k, 0]), names)} from "
                    f"{heater_label(int(j[k]), names)} = {entries[k, 2]:.6g} rad/mW is {frac[k]:.3g} of "
                    f"that heater's own phase (allowed <= {MAX_CROSSTALK_FRACTION})")
    return None


def _mesh_refusal(source: str, got: dict[str, Any], want: dict[str, Any]) -> str:
    """A map made for mesh ``got`` offered mesh ``want`` (:func:`mesh_signature`s): one line naming
    both as ``--mesh`` takes them, the map's mesh first (a map used without its ``--mesh``, whose
    default is smartlight, is the likelier mistake than a wrong map).
    """
    from photonics.configuration import spec_label

    def name(sig: dict[str, Any]) -> tuple[str, str | None]:  # (how the line names it, its --mesh name)
        try:
            label = spec_label(str(sig["kind"]), int(sig["rows"]), int(sig["cols"]))
        except (KeyError, TypeError, ValueError):
            label = None
        return f"{label or sig.get('kind')} ({sig.get('n_tbus')} TBUs)", label

    (made, made_label), (offered, _) = name(got), name(want)
    hint = f"give the mesh it was made for (--mesh {made_label}) or " if made_label else ""
    return (f"{source} was made for mesh {made}, not for {offered}; {hint}calibrate this mesh "
            "(`lumion calibrate`)")


def mesh_signature(mesh: Mesh) -> dict[str, Any]:
    """What a map records about the mesh it belongs to (kind, rows, cols, n_tbus, n_heaters)."""
    return {"kind": mesh.kind, "rows": mesh.rows, "cols": mesh.cols,
            "n_tbus": mesh.n_tbus, "n_heaters": mesh.n_heaters}


def target_differential(cross_fraction: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heater-made differential phase per TBU and which arm makes it (as ``split_phases``).

    Returns ``(phase, arm)``: ``phase`` (rad, >= 0) is what the chosen heater must add to
    its arm's side of the differential; ``arm`` is 0 (top: theta += phase) or 1 (bottom:
    theta -= phase). The cheaper of the two is chosen, the passive ``delta`` cancelled.
    """
    r = np.asarray(cross_fraction, float)
    want = 2 * np.arccos(np.sqrt(np.clip(r, 0, 1)))  # total theta for this split
    need = np.mod(want - np.asarray(delta, float), TWO_PI)
    on_top = need <= np.pi + 1e-12
    return np.where(on_top, need, TWO_PI - need), np.where(on_top, 0, 1)


def _compensating_phases(coupling: sp.csr_matrix, target: np.ndarray, s_max: np.ndarray) -> np.ndarray:
    """Self-phases ``0 <= s <= s_max`` (rad) of the driven heaters minimising
    ``|coupling @ s - target|`` (rad of TBU differential): dense bounded-variable least squares
    up to :data:`DENSE_COMPENSATION_MAX_TBUS` TBUs, the sparse trust-region solver above.
    """
    bounds = (np.zeros(len(target)), s_max)
    if len(target) <= DENSE_COMPENSATION_MAX_TBUS:
        return lsq_linear(coupling.toarray(), target, bounds=bounds, method="bvls", tol=1e-12).x
    return lsq_linear(coupling, target, bounds=bounds, method="trf", tol=1e-12, lsmr_tol="auto",
                      max_iter=200).x


@dataclass(frozen=True, eq=False)
class CalibrationMap:
    """A chip's fitted heater-phase map (see module docstring for the model and units).

    Attributes:
        chip_id: the chip the map belongs to.
        mesh: :func:`mesh_signature` of the chip's mesh.
        delta: (n_tbus,) alpha_top - alpha_bot (rad).
        rho2, rho3: (n_heaters,) self-phase coefficients (rad/mA^2, rad/mA^3).
        eta: (n_heaters,) rad/mW converting self-phase to heat for crosstalk.
        crosstalk: sparse (n_heaters, n_heaters) K (rad/mW), zero diagonal.
        created: ISO-8601 timestamp.
        tbu_names: names of the TBUs (for the JSON form).
        quality: fit quality, per TBU / heater arrays and chip-wide figures.
        nearest_fraction, cutoff_tbu: the crosstalk law K was built from (for the record).
        failed: TBUs calibration found broken (index -> "dead" | "bar" | "cross") or could
            not confirm ("unverified": its fit disagrees with an independent light path);
            routing must avoid them (:meth:`failed_tbus`). A broken TBU's heaters are never
            driven; an unverified TBU keeps its fit (and is set by it).
        disagreement: per "unverified" TBU, the measured disagreement (rad) between its fit
            and the light measurement that could not confirm it.
        unverified_reason: per "unverified" TBU, why light did not confirm it (one of
            :data:`UNVERIFIED_REASONS`); absent for maps that did not record it.
        heater_faults: heater channel -> "open-heater" | "shorted-heater", found by the
            electrical read-back; the heater's TBU is in ``failed`` with that kind.
        common: (n_tbus,) each TBU's common passive phase (rad; NaN where no light could
            tell it), or None for a power-only map (see the module docstring).
    """

    chip_id: str
    mesh: dict[str, Any]
    delta: np.ndarray
    rho2: np.ndarray
    rho3: np.ndarray
    eta: np.ndarray
    crosstalk: sp.csr_matrix
    created: str = ""
    tbu_names: tuple[str, ...] = ()
    quality: dict[str, Any] = field(default_factory=dict)
    nearest_fraction: float = 0.0
    cutoff_tbu: float = 0.0
    failed: dict[int, str] = field(default_factory=dict)
    disagreement: dict[int, float] = field(default_factory=dict)
    unverified_reason: dict[int, str] = field(default_factory=dict)
    heater_faults: dict[int, str] = field(default_factory=dict)
    common: np.ndarray | None = None

    @property
    def phase_calibrated(self) -> bool:
        """Whether the map holds common phases (else it is power-only)."""
        return self.common is not None

    @property
    def n_heaters(self) -> int:
        """Number of heaters."""
        return len(self.rho2)

    @property
    def n_tbus(self) -> int:
        """Number of TBUs."""
        return len(self.delta)

    def failed_tbus(self, *, avoid_unverified: bool = True) -> dict[str, str]:
        """TBUs to route around, by name, as ``photonics.routing`` (``failed=``) and the fabric
        take them: the broken ones with their state, and the unverified ones as "dead" (no
        route may rely on a phase light could not confirm), unless ``avoid_unverified`` is off.
        """
        out = {}
        for t, how in sorted(self.failed.items()):
            if how == "unverified":
                if avoid_unverified:
                    out[self._tbu_name(t)] = "dead"
            elif how in HEATER_FAULT_STATES:
                out[self._tbu_name(t)] = "dead"  # never driven: at its passive split, unknown
            else:
                out[self._tbu_name(t)] = how
        return out

    def faulty_heaters(self) -> dict[int, str]:
        """Heater channel -> one line naming it and its fault (``tbu:0.1.2 bottom heater
        (channel 5): open-heater``), for every heater the electrical check condemned.
        """
        names = self.tbu_names or tuple(f"tbu #{t}" for t in range(self.n_tbus))
        return {h: f"{heater_label(h, names)}: {how}" for h, how in sorted(self.heater_faults.items())}

    def unverified_tbus(self) -> dict[str, float]:
        """TBUs whose fit light could not confirm, by name -> measured disagreement (rad)."""
        return {self._tbu_name(t): float(self.disagreement.get(t, math.nan))
                for t, how in sorted(self.failed.items()) if how == "unverified"}

    def unverified_reasons(self) -> dict[str, str | None]:
        """TBUs whose fit light could not confirm, by name -> why (:data:`UNVERIFIED_REASONS`;
        None when the map does not record it: made before session 39).
        """
        return {self._tbu_name(t): self.unverified_reason.get(t)
                for t, how in sorted(self.failed.items()) if how == "unverified"}

    def check_usable(self) -> None:
        """Raise :class:`CalibrationError` when the map must not program a chip."""
        refusal = self.quality.get("crosstalk_refusal")
        if refusal:
            raise CalibrationRefusedError(f"calibration map for {self.chip_id} is refused: {refusal}; "
                                          "check the chip and recalibrate (`lumion calibrate`)")

    # -- the model --------------------------------------------------------------------
    def self_phases(self, current_ma: np.ndarray) -> np.ndarray:
        """Each heater's own phase (rad) at ``current_ma``."""
        return self_phase(current_ma, self.rho2, self.rho3)

    def arm_phases(self, current_ma: np.ndarray, with_crosstalk: bool = True) -> np.ndarray:
        """Heater-made arm phases (rad, passive phase excluded), crosstalk included by default."""
        s = self.self_phases(current_ma)
        return s + self.crosstalk @ (s / self.eta) if with_crosstalk else s

    def differential(self, current_ma: np.ndarray, with_crosstalk: bool = True) -> np.ndarray:
        """Total differential phase theta per TBU (rad, not wrapped)."""
        arms = self.arm_phases(current_ma, with_crosstalk)
        return self.delta + arms[0::2] - arms[1::2]

    def _coupling(self) -> sp.csr_matrix:
        """D (I + K / eta): heater self-phases -> TBU differential phases."""
        n = self.n_heaters
        full = sp.identity(n, format="csr") + self.crosstalk @ sp.diags(1.0 / self.eta)
        d = sp.csr_matrix((np.tile([1.0, -1.0], self.n_tbus),
                           (np.repeat(np.arange(self.n_tbus), 2), np.arange(n))),
                          shape=(self.n_tbus, n))
        return (d @ full).tocsr()

    # -- HeaterMap --------------------------------------------------------------------
    def currents_for(self, configuration: Configuration, max_current_ma: float,
                     *, compensate: bool = True) -> np.ndarray:
        """Currents (n_heaters,) in mA realising ``configuration``, each <= ``max_current_ma``.

        One heater per TBU is driven (the cheaper one, as ``split_phases`` chooses, given the
        differential its neighbours' heat adds); with ``compensate`` the driven self-phases
        solve ``D (I + K/eta) s = target`` by bounded least squares, so every heater's heat
        on its neighbours is cancelled (re-choosing heaters until every target is met);
        without it, each heater is set as if it were alone (to show what crosstalk costs).

        Failed TBUs (:attr:`failed`) are not driven (0 mA) and their targets ignored;
        unverified ones are set by their fit like any other.

        Raises:
            UnreachableError: a TBU's target needs more than ``max_current_ma``.
            CalibrationError: the configuration is for a different number of TBUs, or the
                map is refused (:meth:`check_usable`).
        """
        self.check_usable()
        r = configuration.cross_fraction
        if r.shape != (self.n_tbus,):
            raise CalibrationError(
                f"configuration has {r.size} TBUs but the map {self.n_tbus}; use the chip's own map"
            )
        live = np.ones(self.n_tbus, bool)
        # an unverified TBU keeps its fit: it is parked by it, and routed through only when the
        # user chose to trust it (failed_tbus(avoid_unverified=False))
        live[[t for t, how in self.failed.items() if how != "unverified"]] = False
        compensate = compensate and bool(self.crosstalk.nnz)
        coupling = self._coupling() if compensate else None
        if coupling is not None and not live.all():
            coupling = (sp.diags(live.astype(float)) @ coupling).tocsr()  # failed rows: no target
        shift = np.zeros(self.n_tbus)  # differential each TBU gets from its neighbours' heat
        for _ in range(6):
            # The cheaper heater for the target *after* the neighbours' heat: otherwise a
            # TBU needing ~0 rad can be pushed past its target where no heat can bring it back.
            phase, arm = target_differential(r, self.delta + shift)
            phase = np.where(live, phase, 0.0)
            active = 2 * np.arange(self.n_tbus) + arm
            s_max = np.where(live, max_self_phase(max_current_ma, self.rho2[active], self.rho3[active]),
                             UNDRIVEN_BOUND_RAD)
            too_far = phase > s_max + 1e-9
            if too_far.any():
                t = int(np.argmax(too_far))
                raise UnreachableError(
                    f"{self._tbu_name(t)} needs {phase[t]:.3f} rad on heater {active[t]}, which "
                    f"reaches only {s_max[t]:.3f} rad at the {max_current_ma} mA limit"
                )
            sign = np.where(arm == 0, 1.0, -1.0)
            target = np.where(live, sign * phase + shift, 0.0)  # wanted heater-made differential
            if coupling is None:
                x = phase
                break
            A = coupling[:, active]  # square: one driven heater per TBU
            x = np.clip(_compensating_phases(A, target, s_max), 0, s_max)
            miss = np.abs(A @ x - target)
            own = np.asarray(coupling[np.arange(self.n_tbus), active]).ravel() * x
            new_shift = A @ x - own
            if not (miss > 1e-6).any():
                break
            shift = new_shift
        else:
            t = int(np.argmax(miss))
            raise UnreachableError(
                f"{self._tbu_name(t)}: crosstalk from its neighbours leaves it {miss[t]:.3f} rad "
                f"from its target within the {max_current_ma} mA limit"
            )
        s = np.zeros(self.n_heaters)
        s[active] = np.where(live, x, 0.0)
        currents = invert_cubic(s, self.rho2, self.rho3)
        return np.minimum(currents, max_current_ma)

    def _tbu_name(self, t: int) -> str:
        return self.tbu_names[t] if self.tbu_names else f"tbu #{t}"

    # -- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Versioned JSON-ready form (see module docstring)."""
        q = self.quality
        tq = {k: q[k] for k in ("sigma_delta_rad",) if k in q}
        hq = {k: q[k] for k in ("sigma_phase_2pi_rad", "rms_residual") if k in q}
        coo = self.crosstalk.tocoo()
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "chip_id": self.chip_id,
            "created": self.created,
            "mesh": dict(self.mesh),
            "tbus": [
                {"name": (self.tbu_names[t] if self.tbu_names else f"tbu:{t}"),
                 "delta_rad": float(self.delta[t]),
                 **{k: float(v[t]) for k, v in tq.items()},
                 **({} if self.common is None else {"common_rad": float(self.common[t])}),
                 **({"failed": self.failed[t]} if t in self.failed else {}),
                 **({"disagreement_rad": float(self.disagreement[t])} if t in self.disagreement else {}),
                 **({"unverified_reason": self.unverified_reason[t]} if t in self.unverified_reason else {})}
                for t in range(self.n_tbus)
            ],
            "heaters": [
                {"channel": h, "rho2": float(self.rho2[h]), "rho3": float(self.rho3[h]),
                 "eta_rad_per_mw": float(self.eta[h]),
                 **{k: float(v[h]) for k, v in hq.items()},
                 **({"fault": self.heater_faults[h]} if h in self.heater_faults else {})}
                for h in range(self.n_heaters)
            ],
            "crosstalk": {
                "nearest_fraction": float(self.nearest_fraction),
                "cutoff_tbu": float(self.cutoff_tbu),
                "entries": [[int(i), int(j), float(v)] for i, j, v in zip(coo.row, coo.col, coo.data,
                                                                          strict=True)],
            },
            "quality": {k: v for k, v in q.items() if k not in (*tq, *hq)},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "calibration map") -> CalibrationMap:
        """Parse and validate :meth:`to_dict` output; raises :class:`CalibrationError`."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise CalibrationError(f"{source} is not a LUMION calibration map (expected schema {SCHEMA!r})")
        version = data.get("version")
        if type(version) is not int or version not in READ_VERSIONS:  # `true` is not 1
            raise CalibrationError(
                f"{source} has calibration map version {version!r}; this software reads "
                f"versions {', '.join(map(str, READ_VERSIONS))} (upgrade lumion or recalibrate with "
                "`lumion calibrate`)"
            )
        try:
            fields = _parse_fields(data)
        except NonFiniteError as exc:
            raise CalibrationError(f"{source}: {exc}; the map is damaged, recalibrate "
                                   "(`lumion calibrate`)") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"{source} is malformed: {exc}") from exc
        problem = _unphysical(fields)
        if problem:
            raise CalibrationError(f"{source}: {problem}")
        n_h = len(fields["rho2"])
        entries = fields["entries"]
        K = sp.csr_matrix((entries[:, 2], (entries[:, 0].astype(int), entries[:, 1].astype(int))),
                          shape=(n_h, n_h))
        return cls(chip_id=fields["chip_id"], mesh=fields["mesh"], delta=fields["delta"], rho2=fields["rho2"],
                   rho3=fields["rho3"], eta=fields["eta"], crosstalk=K, created=str(data.get("created", "")),
                   tbu_names=fields["names"], quality=fields["quality"], nearest_fraction=fields["nearest"],
                   cutoff_tbu=fields["cutoff"], failed=fields["failed"], disagreement=fields["disagreement"],
                   unverified_reason=fields["unverified_reason"], heater_faults=fields["heater_faults"],
                   common=fields["common"])

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Validate, then write atomically; a failed save leaves any old file untouched."""
        path = Path(path)
        try:
            text = json.dumps(_plain(self.to_dict()), indent=1, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CalibrationError(f"map for {self.chip_id} cannot be saved: {exc}") from exc
        CalibrationMap.from_dict(json.loads(text), source=f"map for {self.chip_id}")
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise CalibrationError(f"cannot write calibration map {path}: {exc}") from exc
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, chip_id: str | None = None,
             mesh: Mesh | None = None) -> CalibrationMap:
        """Read a map; with ``chip_id``/``mesh`` refuse one made for another chip."""
        try:
            data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "calibration map"))
        except FileNotFoundError as exc:
            raise CalibrationError(f"calibration map {path} not found; run `lumion calibrate`") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CalibrationError(f"calibration map {path} is corrupt (not valid JSON: {exc}); "
                                   "recalibrate or restore it") from exc
        cmap = cls.from_dict(data, source=str(path))
        cmap.check_for(chip_id=chip_id, mesh=mesh, source=str(path))
        return cmap

    def check_for(self, *, chip_id: str | None = None, mesh: Mesh | None = None,
                  source: str = "calibration map") -> None:
        """Raise :class:`CalibrationError` unless the map belongs to this chip and mesh."""
        if chip_id is not None and chip_id != self.chip_id:
            raise CalibrationError(
                f"{source} was made for chip {self.chip_id!r}, not {chip_id!r}; calibrate this chip "
                "(`lumion calibrate`) or load its own map"
            )
        if mesh is not None:
            want = mesh_signature(mesh)
            got = {k: self.mesh.get(k) for k in want}
            if got != want:
                raise CalibrationError(_mesh_refusal(source, got, want))



def _parse_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The map's fields from its JSON form, types and shapes checked (values: :func:`_unphysical`).

    Raises NonFiniteError (a value is null, NaN or infinite) or KeyError/TypeError/ValueError.
    """
    chip_id = data["chip_id"]
    mesh = dict(data["mesh"])
    tbus, heaters, xt = data["tbus"], data["heaters"], data["crosstalk"]
    if not isinstance(chip_id, str) or not chip_id:
        raise TypeError("chip_id must be a non-empty string")
    n_t, n_h = int(mesh["n_tbus"]), int(mesh["n_heaters"])
    if len(tbus) != n_t or len(heaters) != n_h or n_h != 2 * n_t:
        raise ValueError(f"expected {n_t} TBUs and {2 * n_t} heaters, found {len(tbus)} and {len(heaters)}")
    if [int(h["channel"]) for h in heaters] != list(range(n_h)):
        raise ValueError("heaters must be listed in channel order 0..n-1")
    names = tuple(str(t["name"]) for t in tbus)

    def column(key: str) -> np.ndarray:
        return np.array([_number(h[key], f"{heater_label(k, names)} {key}") for k, h in enumerate(heaters)])

    entries = np.array([[_number(v, "a crosstalk entry") for v in e] for e in xt["entries"]],
                       dtype=float).reshape(-1, 3)
    quality = dict(data.get("quality", {}))
    for key in ("sigma_delta_rad",):
        if all(key in t for t in tbus):
            quality[key] = np.array([float(t[key]) for t in tbus])
    for key in ("sigma_phase_2pi_rad", "rms_residual"):
        if all(key in h for h in heaters):
            quality[key] = np.array([float(h[key]) for h in heaters])
    failed = {k: str(t["failed"]) for k, t in enumerate(tbus) if t.get("failed") is not None}
    bad = [f"{names[k]}={how}" for k, how in failed.items() if how not in FAILURE_STATES]
    if bad:
        raise ValueError(f"failed TBUs must be {'/'.join(FAILURE_STATES)}, not {bad[0]}")
    # null: light through every independent path showed no fringe at all (no figure to give)
    disagreement = {k: (math.nan if tbus[k].get("disagreement_rad") is None
                        else _number(tbus[k]["disagreement_rad"], f"{names[k]} disagreement_rad"))
                    for k, how in failed.items() if how == "unverified"}
    reasons = _unverified_reasons(tbus, failed, disagreement, names)
    has_common = [("common_rad" in t) for t in tbus]
    if any(has_common) and not all(has_common):
        raise ValueError("common_rad must be given for every TBU or for none")
    common = (np.array([math.nan if t["common_rad"] is None else _number(t["common_rad"],
                                                                        f"{names[k]} common_rad")
                        for k, t in enumerate(tbus)]) if all(has_common) and tbus else None)
    return {
        "heater_faults": _heater_faults(heaters, failed, names), "common": common,
        "chip_id": chip_id, "mesh": mesh, "names": names, "entries": entries, "quality": quality,
        "delta": np.array([_number(t["delta_rad"], f"{names[k]} delta_rad") for k, t in enumerate(tbus)]),
        "rho2": column("rho2"), "rho3": column("rho3"), "eta": column("eta_rad_per_mw"),
        "failed": failed, "disagreement": disagreement, "unverified_reason": reasons,
        "nearest": float(xt.get("nearest_fraction", 0.0)), "cutoff": float(xt.get("cutoff_tbu", 0.0)),
    }


def _unverified_reasons(tbus: list[Any], failed: dict[int, str], disagreement: dict[int, float],
                        names: tuple[str, ...]) -> dict[int, str]:
    """TBU -> why light left it unverified, checked (ValueError naming the TBU): only an
    unverified TBU has one, and "disagrees" exactly when its ``disagreement_rad`` is a number.
    """
    reasons = {k: t["unverified_reason"] for k, t in enumerate(tbus)
               if t.get("unverified_reason") is not None}
    for k, why in reasons.items():
        if why not in UNVERIFIED_REASONS:
            raise ValueError(f"{names[k]} unverified_reason must be {'/'.join(UNVERIFIED_REASONS)}, "
                             f"not {why!r}")
        if failed.get(k) != "unverified":
            raise ValueError(f"{names[k]} has an unverified_reason but is not recorded unverified")
        if (why == DISAGREES) != math.isfinite(disagreement[k]):
            raise ValueError(f"{names[k]} unverified_reason {why!r} does not match its disagreement_rad "
                             f"({'null' if not math.isfinite(disagreement[k]) else disagreement[k]})")
    return reasons


def _heater_faults(heaters: list[Any], failed: dict[int, str], names: tuple[str, ...]) -> dict[int, str]:
    """Heater channel -> fault, checked against its TBU's failure (ValueError naming the TBU).

    A faulty heater's TBU is failed with a heater fault, and a TBU failed so has such a heater.
    """
    faults = {k: str(h["fault"]) for k, h in enumerate(heaters) if h.get("fault") is not None}
    for h, how in faults.items():
        if how not in HEATER_FAULT_STATES:
            raise ValueError(f"{heater_label(h, names)} fault must be {'/'.join(HEATER_FAULT_STATES)}, "
                             f"not {how!r}")
        if failed.get(h // 2) not in HEATER_FAULT_STATES:
            raise ValueError(f"{heater_label(h, names)} is {how} but {names[h // 2]} is not recorded "
                             "failed with a heater fault")
    for t, how in failed.items():
        if how in HEATER_FAULT_STATES and not {2 * t, 2 * t + 1} & set(faults):
            raise ValueError(f"{names[t]} is failed {how} but neither of its heaters records a fault")
    return faults


def _unphysical(fields: dict[str, Any]) -> str | None:
    """What in a parsed map no chip can have (one line, TBUs by name), or None."""
    names, rho2, eta, entries = fields["names"], fields["rho2"], fields["eta"], fields["entries"]
    n_h = len(rho2)
    if (rho2 <= 0).any() or (eta <= 0).any():
        h = int(np.argmax((rho2 <= 0) | (eta <= 0)))
        return f"rho2 and eta must be positive for every heater ({heater_label(h, names)} is not)"
    common = fields["common"]
    if common is not None and (np.abs(common[np.isfinite(common)]) > MAX_DELTA_RAD).any():
        t = int(np.argmax(np.where(np.isfinite(common), np.abs(common), 0.0)))
        return (f"{names[t]} common_rad = {common[t]:.6g} is not a phase (|common| <= "
                f"{MAX_DELTA_RAD:.4g} rad); the map is damaged, recalibrate (`lumion calibrate`)")
    far = np.abs(fields["delta"]) > MAX_DELTA_RAD
    if far.any():
        t = int(np.argmax(far))
        return (f"{names[t]} delta_rad = {fields['delta'][t]:.6g} is not a phase (|delta| <= "
                f"{MAX_DELTA_RAD:.4g} rad); the map is damaged, recalibrate (`lumion calibrate`)")
    idx = entries[:, :2]
    if idx.size and (idx.min() < 0 or idx.max() >= n_h or (idx != np.round(idx)).any()):
        return f"crosstalk entries refer to heaters outside 0..{n_h - 1}"
    repeated = _repeated_entry(entries, names)
    if repeated:
        return f"{repeated}; the map is damaged, recalibrate (`lumion calibrate`)"
    implausible = implausible_coefficients(rho2, fields["rho3"], eta, entries, names)
    if implausible:
        return (f"{implausible}, outside what a thermo-optic heater can do (docs/calibration.md, "
                "'The map file'); recalibrate")
    return None


def _repeated_entry(entries: np.ndarray, names: tuple[str, ...]) -> str | None:
    """A crosstalk entry given twice (sparse assembly would silently add them) or on the diagonal."""
    seen: set[tuple[int, int]] = set()
    for i, j in entries[:, :2].astype(int):
        pair = (int(i), int(j))
        if i == j:
            return (f"crosstalk entry [{i}, {j}] puts {heater_label(int(i), names)} on itself "
                    "(K has no diagonal)")
        if pair in seen:
            return (f"crosstalk entry [{i}, {j}] (on {heater_label(int(i), names)} from "
                    f"{heater_label(int(j), names)}) is given twice")
        seen.add(pair)
    return None


def now_iso() -> str:
    """Current UTC time, ISO-8601 to the second."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value

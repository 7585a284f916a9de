"""The calibration map assembled from the procedure's per-TBU records and crosstalk fits."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibration.crosstalk import crosstalk_map
from calibration.map import CalibrationError, CalibrationMap, heater_label, mesh_signature, now_iso
from calibration.model import heater_positions, neighbour_heaters
from calibration.options import NOMINAL_GAMMA_PER_MA, NOMINAL_R0_KOHM, Options
from calibration.records import CrosstalkRecord, TBURecord
from photonics.physics import PhysicsDefaults
from photonics.topology import Mesh

# A victim whose readings the crosstalk model leaves at more than this RMS residual (in the
# meter's sigma, which the readings' own scatter already reaches ~1) is poorly explained.
CROSSTALK_POOR_RESIDUAL = 4.0
# More than this share of poorly explained victims (and more than one): the chip's crosstalk
# is not what the model describes (a much longer range, or nonlinear heat): map refused.
CROSSTALK_MAX_POOR_SHARE = 0.1
# Thermal crosstalk moves a neighbour by a few % of a heater's own phase (docs/physics.md: 1-5 %);
# a fitted fraction beyond 20 % (at 5 sigma) is not crosstalk but a broken measurement.
CROSSTALK_MAX_FRACTION = 0.2


def victim_problem(record: CrosstalkRecord, names: tuple[str, ...] = ()) -> str | None:
    """Why one victim's crosstalk fit cannot be believed, or None (heaters named from ``names``)."""
    if not np.isfinite(record.rms_residual) or record.rms_residual > CROSSTALK_POOR_RESIDUAL:
        return f"the crosstalk model leaves a residual of {record.rms_residual:.1f} sigma"
    for j, f, sig in zip(record.heaters, record.fraction, record.sigma, strict=True):
        if not np.isfinite(f) or abs(f) - 5 * sig > CROSSTALK_MAX_FRACTION:
            return (f"the {heater_label(int(j), names)} would move it by"
                    f" {f:.2f} of its own effect (> {CROSSTALK_MAX_FRACTION}), "
                    "which thermal crosstalk cannot do")
    return None


def screen_crosstalk(
    crosstalk: dict[int, CrosstalkRecord], names: tuple[str, ...] = (),
) -> tuple[dict[int, CrosstalkRecord], dict[int, str]]:
    """(believable victims, rejected victims -> why). Rejected victims keep the fallback law."""
    rejected = {t: why for t, r in crosstalk.items() if (why := victim_problem(r, names)) is not None}
    return {t: r for t, r in crosstalk.items() if t not in rejected}, rejected


def crosstalk_verdict(crosstalk: dict[int, CrosstalkRecord], names: tuple[str, ...] = ()) -> str | None:
    """Why the measured crosstalk must not be used at all, or None.

    Single victims the model explains poorly are set aside (:func:`screen_crosstalk`); when
    more than :data:`CROSSTALK_MAX_POOR_SHARE` of them are, the chip's crosstalk is not what
    the model describes and the map is refused.
    """
    if not crosstalk:
        return None
    _, rejected = screen_crosstalk(crosstalk, names)
    if len(rejected) > max(1.0, CROSSTALK_MAX_POOR_SHARE * len(crosstalk)):
        t, why = next(iter(sorted(rejected.items())))
        name = names[t] if t < len(names) else f"tbu #{t}"
        return (f"the crosstalk model explains the readings of {len(rejected)} of {len(crosstalk)} victims "
                f"poorly (e.g. {name}: {why})")
    return None


def placeholder_record(defaults: PhysicsDefaults) -> TBURecord:
    """The nominal heater for a TBU that could not be calibrated (never programmed)."""
    eta = np.pi / defaults.heater_power_pi_mw
    rho2 = eta * NOMINAL_R0_KOHM
    g3 = rho2 * NOMINAL_GAMMA_PER_MA
    return TBURecord(delta=0.0, g2=[rho2, rho2], g3=[g3, g3], sigma_delta=0.0, sigma_phase_2pi=[0.0, 0.0],
                     rms_residual=0.0, rms_residual_rel=0.0, stage="failed", src=-1, outputs=[])


def build_map(mesh: Mesh, chip_id: str, records: dict[int, TBURecord], options: Options,
              defaults: PhysicsDefaults | None = None, quality: dict[str, Any] | None = None,
              crosstalk: dict[int, CrosstalkRecord] | None = None,
              failed: dict[int, str] | None = None,
              disagreement: dict[int, float] | None = None,
              unverified_reason: dict[int, str] | None = None,
              heater_faults: dict[int, str] | None = None) -> CalibrationMap:
    """The calibration map from per-TBU records and crosstalk (measured, else the law).

    The fitted curves are differential: ``g = s - (K_partner / eta) s = (1 - f) s``; the map
    stores the self-phase ``s = g / (1 - f)`` and K, so the inversion can compensate heat
    from every neighbour, not only the partner arm. Each TBU's fitted ``delta`` includes
    the heat of its neighbours during its sweeps (recorded in ``base_ma``); that is
    removed with K, so the map's ``delta`` is the passive differential phase.

    ``failed`` TBUs (index -> "dead" | "bar" | "cross") have no fit: the map records them
    as failed, with the nominal heater as a placeholder that is never programmed; an
    "unverified" TBU keeps its record's fit, and ``disagreement`` (rad) says how far light
    disagreed with it (``unverified_reason``: why, calibration.map.UNVERIFIED_REASONS).
    ``heater_faults`` (channel -> "open-heater" | "shorted-heater")
    name the heaters the electrical check condemned; their TBUs are in ``failed``.
    """
    d = defaults or PhysicsDefaults()
    failed = dict(failed or {})
    records = {**{t: placeholder_record(d) for t in failed}, **records}
    missing = sorted(set(range(mesh.n_tbus)) - set(records))
    if missing:
        raise CalibrationError(
            f"{len(missing)} TBUs are not calibrated yet (first: {mesh.tbu_names[missing[0]]})"
        )
    eta = np.full(mesh.n_heaters, np.pi / d.heater_power_pi_mw)
    believed, rejected = screen_crosstalk(crosstalk or {}, mesh.tbu_names)
    K, fitted = crosstalk_map(mesh, eta, options, believed)
    partner = np.arange(mesh.n_heaters) ^ 1
    # Fraction of each heater's own phase landing on its partner arm (K is rad/mW, heat = s/eta).
    f_partner = np.asarray(K[partner, np.arange(mesh.n_heaters)]).ravel() / eta
    g2 = np.array([records[t].g2[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    g3 = np.array([records[t].g3[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    scale = 1.0 / (1.0 - f_partner)
    rho2, rho3 = g2 * scale, g3 * scale
    delta = np.array([records[t].delta for t in range(mesh.n_tbus)])
    diff = (K[0::2] - K[1::2]).tocsr()  # (n_tbus, n_heaters): heat -> differential phase
    for t in range(mesh.n_tbus):
        base = records[t].base_ma
        if base:
            heat = np.zeros(mesh.n_heaters)
            for key, i in base.items():
                j = int(key)
                if j // 2 != t:
                    heat[j] = float(rho2[j] * i**2 + rho3[j] * i**3) / eta[j]
            delta[t] = np.mod(delta[t] - float(diff[t].dot(heat)[0]), 2 * np.pi)
    q = dict(quality or {})
    q["sigma_delta_rad"] = np.array([records[t].sigma_delta for t in range(mesh.n_tbus)])
    q["sigma_phase_2pi_rad"] = np.array([records[t].sigma_phase_2pi[k] for t in range(mesh.n_tbus)
                                         for k in (0, 1)])
    q["rms_residual"] = np.repeat([records[t].rms_residual for t in range(mesh.n_tbus)], 2)
    n_diff = sum(len(h) for h in neighbour_heaters(heater_positions(mesh.tbu_xy),
                                                   options.crosstalk_cutoff_tbu))
    q["crosstalk_entries_fitted"] = 2 * len(fitted)  # two arm entries per measured difference
    q["crosstalk_entries_assumed"] = int(K.nnz) - 2 * len(fitted)
    q["crosstalk_differences_fitted"] = len(fitted)
    q["crosstalk_differences_total"] = n_diff
    q["crosstalk_fitted"] = [[int(t), int(j), float(v), float(s)] for t, j, v, s in fitted]
    if len(fitted):
        rel = fitted[:, 3] / np.maximum(np.abs(fitted[:, 2]), 1e-12)
        q["crosstalk_median_rel_sigma"] = float(np.median(rel))
    q["crosstalk_refusal"] = crosstalk_verdict(crosstalk or {}, mesh.tbu_names)
    q["crosstalk_rejected_victims"] = {mesh.tbu_names[t]: why for t, why in sorted(rejected.items())}
    q["warnings"] = [*q.get("warnings", []),
                     *(f"{mesh.tbu_names[t]}: crosstalk fit set aside, the design law is used ({why})"
                       for t, why in sorted(rejected.items()))]
    return CalibrationMap(
        failed=failed, disagreement=dict(disagreement or {}),
        unverified_reason=dict(unverified_reason or {}), heater_faults=dict(heater_faults or {}),
        chip_id=chip_id, mesh=mesh_signature(mesh), delta=delta,
        rho2=rho2, rho3=rho3, eta=eta, crosstalk=K.tocsr(), created=now_iso(),
        tbu_names=mesh.tbu_names, quality=q,
        nearest_fraction=options.crosstalk_fraction, cutoff_tbu=options.crosstalk_cutoff_tbu,
    )

"""The calibration map assembled from the procedure's per-TBU records and crosstalk fits."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibration.crosstalk import crosstalk_map
from calibration.map import CalibrationError, CalibrationMap, mesh_signature, now_iso
from calibration.model import heater_positions, neighbour_heaters
from calibration.options import Options
from calibration.records import CrosstalkRecord, TBURecord
from photonics.physics import PhysicsDefaults
from photonics.topology import Mesh


def build_map(mesh: Mesh, chip_id: str, records: dict[int, TBURecord], options: Options,
              defaults: PhysicsDefaults | None = None, quality: dict[str, Any] | None = None,
              crosstalk: dict[int, CrosstalkRecord] | None = None) -> CalibrationMap:
    """The calibration map from per-TBU records and crosstalk (measured, else the law).

    The fitted curves are differential: ``g = s - (K_partner / eta) s = (1 - f) s``; the map
    stores the self-phase ``s = g / (1 - f)`` and K, so the inversion can compensate heat
    from every neighbour, not only the partner arm. Each TBU's fitted ``delta`` includes
    the heat of its neighbours during its sweeps (recorded in ``base_ma``); that is
    removed with K, so the map's ``delta`` is the passive differential phase.
    """
    d = defaults or PhysicsDefaults()
    missing = sorted(set(range(mesh.n_tbus)) - set(records))
    if missing:
        raise CalibrationError(
            f"{len(missing)} TBUs are not calibrated yet (first: {mesh.tbu_names[missing[0]]})"
        )
    eta = np.full(mesh.n_heaters, np.pi / d.heater_power_pi_mw)
    K, fitted = crosstalk_map(mesh, eta, options, crosstalk)
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
    return CalibrationMap(
        chip_id=chip_id, mesh=mesh_signature(mesh), delta=delta,
        rho2=rho2, rho3=rho3, eta=eta, crosstalk=K.tocsr(), created=now_iso(),
        tbu_names=mesh.tbu_names, quality=q,
        nearest_fraction=options.crosstalk_fraction, cutoff_tbu=options.crosstalk_cutoff_tbu,
    )

"""The ``yield`` campaign: which fabricated chips carry a job, spares included, with margin.

A chip is drawn per task from ``photonics.physics.fabricated_params`` (per-TBU loss spread
``loss_spread_db``, coupler spread ``kappa_spread`` -- which sets the extinction ratio
spread -- and random phase offsets), seeded by its own ``SeedSequence``. On it the job (a
ring over the fabric's workers) is placed, and every single worker failure is recovered
by the hitless failover (``photonics.fabric.failover``: a spare spliced in, only the
failed worker's links re-routed, every other route kept). The chip **yields** when the
job and every recovery close every link with margin >= ``margin_db`` and ACR >=
``min_acr_db``. Chip k has the same random draws at every grid
point (common random numbers: the spreads scale the same normal deviates), so a row's
change along the grid is the spread's effect, not a new chip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaigns.engine import CampaignError, task_seeds

# Margins are measured, not enforced, while placing: below this the link is dead anyway.
MEASURE_FLOOR_DB = -100.0


@dataclass(frozen=True)
class ChipTask:
    """One fabricated chip at one grid point (picklable: it travels to Dask workers)."""

    mesh: str
    workers: int
    spares: int
    loss_spread_db: float
    kappa_spread: float
    margin_db: float
    min_acr_db: float
    chip: int
    seed: np.random.SeedSequence


def _figures(plan: Any) -> tuple[float, float]:
    """(worst margin dB, worst ACR dB) of a placed job."""
    return plan.worst_margin_db, min(lk.acr_db for lk in plan.links)


def _splice(fabric: Any, job: Any, plan: Any, worker: str, params: Any,
            margin_db: float) -> tuple[float, float]:
    """Figures after the hitless failover of ``worker`` (-inf when no spare can be spliced in).

    Asked first for ``margin_db`` (the failover then picks a spare that keeps it, if any);
    when none does, asked again without a floor so the table still records the margin of
    the spare it would use.
    """
    from photonics.fabric import FabricError, failover

    for floor in (margin_db, MEASURE_FLOOR_DB):
        try:
            return _figures(failover(fabric, job, worker, plan, params=params, required_margin_db=floor).plan)
        except FabricError:
            continue
    return -math.inf, -math.inf


def chip_task(task: ChipTask) -> dict[str, Any]:
    """Measure one chip (see module docstring); one table row."""
    from photonics.collectives import slot_fabric
    from photonics.fabric import FabricError, place_job, ring_job
    from photonics.physics import fabricated_params

    fabric = slot_fabric(task.mesh, task.workers, task.spares)
    rng = np.random.default_rng(task.seed)
    params = fabricated_params(fabric.mesh.n_tbus, fabric.mesh.n_links, rng,
                               loss_spread_db=task.loss_spread_db, kappa_spread=task.kappa_spread)
    job = ring_job(list(fabric.workers))
    spare_margin, spare_acr = math.inf, math.inf
    try:
        plan = place_job(fabric, job, params=params, required_margin_db=MEASURE_FLOOR_DB)
    except FabricError:
        plan = None
        job_margin = job_acr = spare_margin = spare_acr = -math.inf
    if plan is not None:
        job_margin, job_acr = _figures(plan)
        for w in (fabric.workers if fabric.spares else ()):
            m, a = _splice(fabric, job, plan, w, params, task.margin_db)
            spare_margin, spare_acr = min(spare_margin, m), min(spare_acr, a)
    ok = (job_margin >= task.margin_db and job_acr >= task.min_acr_db
          and spare_margin >= task.margin_db and spare_acr >= task.min_acr_db)
    return {"mesh": task.mesh, "workers": task.workers, "spares": task.spares,
            "loss_spread_db": task.loss_spread_db, "kappa_spread": task.kappa_spread, "chip": task.chip,
            "job_margin_db": job_margin, "job_acr_db": job_acr,
            "spare_margin_db": spare_margin if fabric.spares else None,
            "spare_acr_db": spare_acr if fabric.spares else None, "ok": bool(ok)}


def yield_tasks(meshes: Sequence[str], loss_spreads: Sequence[float], kappa_spreads: Sequence[float], *,
                chips: int, seed: int, workers: int, spares: int, margin_db: float,
                min_acr_db: float) -> list[ChipTask]:
    """The grid meshes x loss spreads x coupler spreads x chips, chip k seeded by spawn index k."""
    if chips < 1:
        raise CampaignError(f"give at least 1 chip, not {chips}")
    for v in (*loss_spreads, *kappa_spreads):
        if not (math.isfinite(v) and v >= 0):
            raise CampaignError(f"spreads are numbers >= 0, not {v!r}")
    seeds = task_seeds(seed, chips)
    return [ChipTask(m, workers, spares, ls, ks, margin_db, min_acr_db, k, seeds[k])
            for m in meshes for ls in loss_spreads for ks in kappa_spreads for k in range(chips)]


def yield_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Yield per grid point (mesh, loss spread, coupler spread), in grid order."""
    groups: dict[tuple[str, float, float], list[bool]] = {}
    for r in rows:
        groups.setdefault((r["mesh"], r["loss_spread_db"], r["kappa_spread"]), []).append(r["ok"])
    return [{"mesh": m, "loss_spread_db": ls, "kappa_spread": ks, "n_chips": len(v),
             "yield": sum(v) / len(v)} for (m, ls, ks), v in groups.items()]

"""Per-phase reconfiguration (Opus-style) of a phased job: every phase routed, with the heater
deltas and modelled switch time between consecutive configurations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from photonics.configuration import Configuration
from photonics.errors import RoutingError
from photonics.fabric.jobs import PhasedJob, link_ports, links_job
from photonics.fabric.matchings import accelerator_matchings
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.plan import (
    MAX_CURRENT_MA,
    WRITE_RESOLUTION,
    CurrentMap,
    evaluate,
    failures_with_map,
    heater_values,
    route_links,
    stuck_states,
)
from photonics.fabric.timing import TimingModel, configuration_phase_step, recovery_timing
from photonics.physics import PhysicsDefaults, TBUParams
from photonics.routing import build_graph, route_loss_db
from photonics.tolerances import REQUIRED_MARGIN_DB


# ---------------------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PhaseConfig:
    """One configuration of a phased job: links, routes, figures and the step into it."""

    phase: str
    step: str
    links: tuple[tuple[str, str], ...]
    configuration: Configuration
    heater: np.ndarray
    worst_loss_db: float
    worst_margin_db: float
    worst_acr_db: float
    changed_tbus: int
    changed_heaters: int
    switch_ms: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"phase": self.phase, "step": self.step, "links": [f"{a}->{b}" for a, b in self.links],
                "worst_loss_db": self.worst_loss_db, "worst_margin_db": self.worst_margin_db,
                "worst_acr_db": self.worst_acr_db, "n_changed_tbus": self.changed_tbus,
                "n_changed_heaters": self.changed_heaters, "switch_ms": self.switch_ms}


def plan_phases(
    fabric: Fabric,
    job: PhasedJob,
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    max_current_ma: float = MAX_CURRENT_MA,
    cyclic: bool = True,
) -> list[PhaseConfig]:
    """Route every phase and model the switch between consecutive configurations.

    A phase of rings, lines or links is one configuration; an all-to-all phase is one
    configuration per round of :func:`accelerator_matchings`. The switch into a
    configuration writes only the heaters that change from the previous one (the first
    from an all-parked chip; with ``cyclic`` the first also gets the step from the last,
    as a training loop repeats its phases) and costs write + settle + re-lock + verify
    of :func:`~photonics.fabric.recovery_timing` (nothing to detect or compute: the
    schedule is computed ahead).
    """
    timing = timing or TimingModel()
    mesh = fabric.mesh
    # (phase, step label, links, splittable): an all-to-all round that does not route is
    # split into two halves of its pairs (reported in the step label), recursively.
    steps: list[tuple[str, str, tuple[tuple[str, str], ...], bool]] = []
    for ph in job.phases:
        if ph.kind == "all-to-all":
            for g_i, group in enumerate(ph.groups):
                rounds = accelerator_matchings(group)
                for r, links in enumerate(rounds):
                    tag = f"group {g_i + 1} " if len(ph.groups) > 1 else ""
                    steps.append((ph.name, f"{tag}matching {r + 1}/{len(rounds)}", tuple(links), True))
        else:
            steps.append((ph.name, "all circuits", ph.links, False))
    failed = failures_with_map(mesh, heater_map, None)  # never route through a failed TBU
    graph = build_graph(mesh, params, failed=failed)
    built = []
    while steps:
        name, step, links, splittable = steps.pop(0)
        try:
            sub = links_job(links, name)
            pairs = link_ports(fabric, sub.links)
            routes = route_links(mesh, pairs, failed=failed, params=params)
        except (RoutingError, FabricError) as exc:
            if splittable and len(links) > 2:
                bidi = [links[i:i + 2] for i in range(0, len(links), 2)]  # (a->b, b->a) per pair
                halves = [tuple(x for pr in bidi[k::2] for x in pr) for k in (0, 1)]
                steps[:0] = [(name, f"{step} (split {k + 1}/2)", h, True) for k, h in enumerate(halves)]
                continue
            raise FabricError(f"phase {name!r} ({step}) cannot be routed: {exc}") from None
        conf = Configuration.from_routes(mesh, routes)
        conf = Configuration(stuck_states(conf.cross_fraction, failed), tuple(routes), mesh=mesh)
        res = evaluate(fabric, sub.links, routes, conf, params=params, failed=failed, defaults=defaults,
                       required_margin_db=required_margin_db,
                       loss_db=[route_loss_db(graph, r) for r in routes])
        bad = [r for r in res if not r.budget_ok]
        if bad:
            raise FabricError(f"phase {name!r} ({step}): {bad[0].link[0]}->{bad[0].link[1]} refused: "
                              f"{bad[0].reason}")
        heater, _ = heater_values(conf, heater_map, max_current_ma)
        built.append((name, step, sub.links, conf, heater, res, pairs))
    parked = Configuration.parked(mesh)
    out = []
    for k, (name, step, links, conf, heater, res, pairs) in enumerate(built):
        if k == 0 and not (cyclic and len(built) > 1):
            prev_heater = heater_values(parked, heater_map, max_current_ma)[0]
            prev_conf, prev_pairs = parked, []
        else:
            prev = built[k - 1]
            prev_conf, prev_heater, prev_pairs = prev[3], prev[4], prev[6]
        write = np.flatnonzero(np.abs(heater - prev_heater) > WRITE_RESOLUTION)
        program = {int(ch): float(heater[ch]) for ch in write}
        # Links whose receiver sees a new transmitter (or new light) must re-lock.
        moved = [p for p in pairs if p not in prev_pairs]
        relock = max((fabric.lane(d).relock_ms for _, d in moved), default=0.0)
        step_rad = configuration_phase_step(prev_conf, conf, program)
        switch = recovery_timing(timing, 0.0, program, relock, len(moved), detect=False,
                                 max_phase_step_rad=step_rad)
        del switch["compute"], switch["detect"]
        out.append(PhaseConfig(name, step, links, conf, heater, max(r.loss_db for r in res),
                               min(r.margin_db for r in res), min(r.acr_db for r in res),
                               len(conf.changed_tbus(prev_conf)), len(program), switch))
    return out

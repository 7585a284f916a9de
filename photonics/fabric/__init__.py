"""The rack-level fabric, one module per concern (see docs/fabric.md).

- :mod:`~photonics.fabric.model`: accelerators bound to mesh ports, lanes, the fabric file format;
- :mod:`~photonics.fabric.jobs`: logical topologies and phased job descriptions;
- :mod:`~photonics.fabric.plan`: placing a job (routing, evaluation, heater values);
- :mod:`~photonics.fabric.plan_io`: plans as ``lumion.plan`` files, recoveries as JSON;
- :mod:`~photonics.fabric.timing`: the recovery-time model;
- :mod:`~photonics.fabric.recovery`: hitless failover and failed-TBU repair;
- :mod:`~photonics.fabric.matchings`: all-to-all by matchings;
- :mod:`~photonics.fabric.phases`: per-phase reconfiguration.
"""

from photonics.fabric.jobs import (
    Job,
    Phase,
    PhasedJob,
    check_job,
    line_job,
    link_ports,
    links_job,
    load_job_toml,
    parse_job_toml,
    ring_job,
)
from photonics.fabric.matchings import (
    MatchingConfig,
    Schedule,
    accelerator_matchings,
    circle_factorization,
    schedule,
    spread_ports,
    well_connected_ports,
)
from photonics.fabric.model import (
    DEFAULT_TRANSCEIVER,
    SCHEMA,
    SCHEMA_VERSION,
    TOPOLOGIES,
    Accelerator,
    Fabric,
    FabricError,
    default_fabric,
    lanes_summary,
    make_fabric,
)
from photonics.fabric.phases import (
    PhaseConfig,
    plan_phases,
)
from photonics.fabric.plan import (
    MAX_CURRENT_MA,
    WRITE_RESOLUTION,
    CurrentMap,
    JobPlan,
    LinkResult,
    evaluate,
    heater_values,
    held_graph,
    place_job,
    route_links,
    routes_loss_db,
)
from photonics.fabric.plan_io import (
    PLAN_SCHEMA,
    PLAN_VERSION,
    load_plan,
    plan_from_dict,
    plan_to_dict,
    recovery_to_dict,
    save_plan,
)
from photonics.fabric.recovery import (
    Recovery,
    fail_tbu,
    failover,
    held_unchanged,
    table_loss,
)
from photonics.fabric.timing import (
    TimingModel,
    recovery_timing,
)

__all__ = [
    "DEFAULT_TRANSCEIVER",
    "MAX_CURRENT_MA",
    "PLAN_SCHEMA",
    "PLAN_VERSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TOPOLOGIES",
    "WRITE_RESOLUTION",
    "Accelerator",
    "CurrentMap",
    "Fabric",
    "FabricError",
    "Job",
    "JobPlan",
    "LinkResult",
    "MatchingConfig",
    "Phase",
    "PhaseConfig",
    "PhasedJob",
    "Recovery",
    "Schedule",
    "TimingModel",
    "accelerator_matchings",
    "check_job",
    "circle_factorization",
    "default_fabric",
    "evaluate",
    "fail_tbu",
    "failover",
    "heater_values",
    "held_graph",
    "held_unchanged",
    "lanes_summary",
    "line_job",
    "link_ports",
    "links_job",
    "load_job_toml",
    "load_plan",
    "make_fabric",
    "parse_job_toml",
    "place_job",
    "plan_from_dict",
    "plan_phases",
    "plan_to_dict",
    "recovery_timing",
    "recovery_to_dict",
    "ring_job",
    "route_links",
    "routes_loss_db",
    "save_plan",
    "schedule",
    "spread_ports",
    "table_loss",
    "well_connected_ports",
]

"""Model of ``lumion.plan`` v1: a running job's routes, heaters and recoveries (``lumion failover --out``).

Written from the fabric engineer's ``photonics.fabric.plan_io`` output; its loader is the
authority. Kept apart from :mod:`lab_scripts.schemas.files` because it reuses the recovery
model of the failover output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lab_scripts.schemas.files import ConfigurationFile, ConfiguredRoute, JobLinks
from lab_scripts.schemas.outputs import FailoverLink, Recovery
from lab_scripts.schemas.types import Fingerprint, MeshSpec, Open


class PlanLink(FailoverLink):
    """A link of the plan with its route (and why it is down, if it is)."""

    reason: str | None = None
    route: ConfiguredRoute | None = None


class PlanFile(Open):
    """``lumion.plan`` v1: what is programmed for a job, and how it got there."""

    schema_name: Literal["lumion.plan"] = Field(alias="schema")
    version: Literal[1]
    fabric: str
    mesh_spec: MeshSpec
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    job: JobLinks
    links: list[PlanLink]
    worst_margin_db: float | None
    configuration: ConfigurationFile
    heater_unit: Literal["mA", "rad"]
    heater: list[float] = Field(description="every heater's value, in heater_unit, by channel")
    failed_tbus: dict[str, Literal["dead", "bar", "cross"]]
    failed_accelerators: list[str]
    recoveries: list[Recovery]

"""Models of multicast failover: the ``lumion.multicast-plan`` v1 file and the
``lumion.multicast-failover`` v1 output of ``lumion failover --plan MC.json``.

Written from :mod:`photonics.fabric.multicast_io` (its loader is the authority) and
:mod:`lab_scripts.failover_multicast`. Kept apart from the point-to-point plan and failover
models: a tree's groups, branches and splits are not a job's links.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lab_scripts.schemas.files import ConfigurationFile, ConfiguredRoute, FabricFile
from lab_scripts.schemas.outputs import HeaterSetting, LightVerification
from lab_scripts.schemas.types import (
    Db,
    DbOrNull,
    Fingerprint,
    MeshSpec,
    Open,
    Path,
    PortName,
    Strict,
    TbuName,
)


class Split(Strict):
    """A TBU where branches part, and the share it crosses over."""

    tbu: TbuName
    cross_fraction: float = Field(ge=0, le=1)


class TreeFile(Open):
    """A multicast tree: the source port, a branch (route) per receiver, the splits."""

    src: PortName
    dsts: list[PortName]
    splits: list[Split]
    branches: list[ConfiguredRoute]


class Branch(Strict):
    """One branch of a group as the circuit solve and the link budget saw it (dB)."""

    link: str = Field(description="<source accelerator>-><receiver>")
    transmission_db: Db = Field(description="worst over the lane's wavelengths, per unit launched")
    margin_db: Db
    budget_ok: bool
    reason: str | None


class GroupFile(Open):
    """One multicast group: its source, receivers (in branch order), tree and figures."""

    src: str
    dsts: list[str] = Field(min_length=1)
    tree: TreeFile
    acr_db: DbOrNull
    spread_db: Db = Field(description="largest difference between two receivers at one wavelength")
    branches: list[Branch]


class MulticastPlanFile(Open):
    """``lumion.multicast-plan`` v1: a running configuration of multicast trees."""

    schema_name: Literal["lumion.multicast-plan"] = Field(alias="schema")
    version: Literal[1]
    fabric: str
    mesh_spec: MeshSpec
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    groups: list[GroupFile] = Field(min_length=1)
    ok: bool = Field(description="every branch closes its budget")
    worst_margin_db: Db
    configuration: ConfigurationFile
    dark_ports: list[PortName] = Field(description="ports of pruned receivers (no victim in the ACR)")
    failed_tbus: dict[str, Literal["dead", "bar", "cross"]]
    failed_accelerators: list[str]
    recoveries: list[dict[str, Any]] = Field(description="each recovery's summary (failed, spare, action, "
                                             "changed_tbus, shift_db, verified), in order")
    fabric_file: FabricFile | None = Field(None, description="the fabric the plan was made on (lumion "
                                           "failover uses it without --fabric when the plan is not on the "
                                           "default fabric's mesh)")


class BranchChange(Strict):
    """A branch after the recovery, with its power before when it was held (dB)."""

    link: str = Field(description="<source accelerator>-><receiver>")
    held: bool = Field(description="it ran before the recovery (false: the spare's new branch)")
    before_db: float | None = Field(description="transmission before (null for the new branch)")
    after_db: Db
    change_db: float | None = Field(description="after minus before (null for the new branch)")
    margin_db: Db
    budget_ok: bool
    acr_db: DbOrNull


class GroupNames(Strict):
    """A group after the recovery: source and receivers."""

    src: str
    dsts: list[str]


class TreeCrosstalk(Strict):
    """One tree's source lit by the bench laser, as placed or after a recovery (instruments.tree_leak)."""

    source: str = Field(description="the tree's transmitting accelerator")
    weakest_branch: str = Field(description="source->receiver of its weakest branch ('' when not measured)")
    branch_dbm: float | None
    victim: str = Field(description="the working receiver outside the tree that read most of its light")
    victim_dbm: float | None
    acr_db: float | None = Field(description="branch_dbm - victim_dbm (dB), null when not measured")
    min_acr_db: float = Field(description="photonics.tolerances.MIN_ACR_DB: a lower ACR is off")
    status: Literal["ok", "off", "not measured"]
    reason: str = Field(description="why not measured ('' when measured)")


class MulticastFailoverOutput(Strict):
    """``lumion failover --plan MC.json --json``: a failed receiver pruned or spliced."""

    schema_name: Literal["lumion.multicast-failover"] = Field(alias="schema")
    version: Literal[1]
    fabric: str
    plan: Path = Field(description="the multicast plan acted on")
    out: Path | None = Field(description="the lumion.multicast-plan file written by --out, or null")
    plot: Path | None = Field(description="the mesh with the trees after the recovery (--plot), or null")
    failed: str
    spare: str | None
    action: Literal["pruned", "spliced"]
    branch: str = Field(description="the failed receiver's branch, <source>-><receiver>")
    changed_tbus: list[TbuName]
    changed_heaters: list[HeaterSetting]
    heater_unit: Literal["mA"]
    held_heater_drift: float = Field(description="largest change (mA) the map wanted on a held channel; "
                                     "never written")
    shift_db: Db = Field(description="largest change of a held branch's power in the circuit solve")
    tolerance_db: Db = Field(description="photonics.fabric.multicast_failover.BRANCH_TOL_DB")
    branches: list[BranchChange]
    groups: list[GroupNames]
    worst_margin_db: Db
    verified: Literal["by light", "partly", "not measured", "off"]
    verification: LightVerification
    unverified_branches: list[str] = Field(description="branches no meter reached (never called ok)")
    refusal: str | None = Field(description="--light report: why light rejected the kept recovery")
    tree_crosstalk: list[TreeCrosstalk] = Field(
        description="each tree's source lit by the bench laser after the recovery: its weakest branch over "
        "its strongest working receiver outside the tree (instruments.tree_leak); empty without a bench")
    placement_verification: LightVerification | None = Field(
        description="the trees written whole and read on --bench before the recovery; null without")
    placement_tree_crosstalk: list[TreeCrosstalk] = Field(
        default_factory=list, description="each tree's source lit by the bench laser as placed, before the "
        "recovery, by the same checker (instruments.tree_leak): an off tree makes placement_verification "
        "off (exit 5; the recovery kept, and that tree's leak after it refuses nothing); empty without a "
        "bench")

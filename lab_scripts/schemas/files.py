"""Models of LUMION's data files: meshes, states, configurations, fabrics, calibration maps,
checkpoints, pad maps, bench configs (TOML) and phased jobs (TOML).

Each model states what its loader accepts: the required keys and their types, the schema
name and the version(s) it reads. Loaders ignore keys they do not know, so these schemas
allow them too (``Open``); tests check that files our writers produce validate, and that
files the schemas refuse are refused by the loaders as well.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from lab_scripts.schemas.types import (
    Channel,
    Count,
    Fingerprint,
    MeshSpec,
    Open,
    PortName,
    Seconds,
    Strict,
    TbuName,
    TbuState,
)

TbuPort = Annotated[str, Field(pattern=r"^.+/(a0|a1|b0|b1)$", description="<TBU name>/<a0|a1|b0|b1>")]
Point = Annotated[list[float], Field(min_length=2, max_length=2, description="[x, y] in cell units")]
MeshKind = Literal["hexagonal", "square", "triangular", "custom"]


class MeshTbu(Open):
    """A TBU: its name and the drawing coordinates of its two ends."""

    name: str
    a: Point
    b: Point


class MeshPort(Open):
    """A mesh port: its name and the TBU end it is."""

    name: str
    tbu_port: TbuPort


class MeshFile(Open):
    """``lumion.mesh`` v1: a topology (``Mesh.save``, ``lumion mesh --save``)."""

    schema_name: Literal["lumion.mesh"] = Field(alias="schema")
    version: Literal[1]
    kind: MeshKind = "custom"
    rows: Count = 0
    cols: Count = 0
    tbus: list[MeshTbu]
    links: list[Annotated[list[TbuPort], Field(min_length=2, max_length=2)]]
    ports: list[MeshPort]


class Split(Strict):
    """A TBU set to a split ratio: the cross fraction (0 = bar, 1 = cross)."""

    split: float = Field(ge=0, le=1)


class Phases(Strict):
    """A TBU's two heater phases (rad, for offset-free arms)."""

    top: float = Field(description="rad")
    bot: float = Field(description="rad")


class StatePrediction(Open):
    """What light should show once the state is programmed (``photonics.synthesis.prediction``;
    written by ``lumion synthesize --out``, checked by ``lumion program``).
    """

    kind: str = Field("", description="the synthesis: unitary, filter, mz_filter, ...")
    chip: str = Field("", description="the chip model the state was refined on")
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    tbus: list[TbuName] = Field(description="the TBUs the target uses (a map must not record them failed)")
    inputs: list[PortName] = Field(min_length=1, description="the ports light enters by")
    outputs: list[PortName] = Field(description="the target's output ports")
    wavelengths_nm: list[Annotated[float, Field(gt=0)]] = Field(min_length=1, max_length=3,
                                                               description="where the powers hold (nm)")
    powers: list[list[list[Annotated[float, Field(ge=0)]]]] = Field(
        description="per wavelength, one row per mesh port, one column per input: the power there per unit "
        "power in")


class StateFile(Open):
    """``lumion.state`` v1: heater phases per TBU (``MeshState.to_dict``), with ``lumion synthesize``'s
    prediction of what light then shows (optional; readers that do not know it ignore it).
    """

    schema_name: Literal["lumion.state"] = Field(alias="schema")
    version: Literal[1]
    default: TbuState = "bar"
    tbus: dict[str, TbuState | Split | Phases] = Field(default_factory=dict)
    prediction: StatePrediction | None = None


class ConfiguredHop(Open):
    """A hop of a configured route: the TBU, its state, and the ports light enters and leaves by."""

    tbu: TbuName
    state: TbuState | None = None
    entry: Literal["a0", "a1", "b0", "b1"]
    exit: Literal["a0", "a1", "b0", "b1"]


class ConfiguredRoute(Open):
    """A route recorded in a configuration."""

    src: PortName
    dst: PortName
    tbus: list[ConfiguredHop]


class ConfigurationFile(Open):
    """``lumion.configuration`` v2: what the mesh should do, for one mesh (v1: see ConfigurationV1)."""

    schema_name: Literal["lumion.configuration"] = Field(alias="schema")
    version: Literal[2]
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    tbus: dict[str, TbuState | Split] = Field(default_factory=dict)
    routes: list[ConfiguredRoute] = Field(default_factory=list)


class ConfigurationV1(Open):
    """``lumion.configuration`` v1, still read when it lists exactly the mesh's TBUs."""

    schema_name: Literal["lumion.configuration"] = Field(alias="schema")
    version: Literal[1]
    tbus: dict[str, TbuState | Split] = Field(default_factory=dict)
    routes: list[ConfiguredRoute] = Field(default_factory=list)


class Lane(Open):
    """A port's transceiver lane declaration (overrides the fabric's default transceiver)."""

    transceiver: str | None = None
    polarization: str | None = None
    wavelengths_nm: list[float] | None = Field(
        default=None, min_length=1, description="the lane's channel centre(s), nm (DWDM: the channel it is "
                                                "tuned to); routes from this port are checked there")
    channel_width_nm: float | None = Field(
        default=None, ge=0, description="width of each channel's slot, nm (0.8: a 100 GHz grid slot)")


class FabricAccelerator(Open):
    """An accelerator and the mesh ports of its transmit and receive lanes."""

    name: str
    tx: list[PortName | int]
    rx: list[PortName | int]
    spare: bool = False


class FabricFile(Open):
    """``lumion.fabric`` v1: accelerators bound to mesh ports (``Fabric.save``)."""

    schema_name: Literal["lumion.fabric"] = Field(alias="schema")
    version: Literal[1]
    name: str | None = None
    mesh: MeshSpec = "smartlight"
    transceiver: str | None = None
    accelerators: list[FabricAccelerator] = Field(min_length=1)
    ports: dict[str, Lane] | None = None


class JobLinks(Strict):
    """A job over accelerators with its directed links (as the fabric reports it)."""

    name: str
    topology: str
    accelerators: list[str]
    links: list[Annotated[list[str], Field(min_length=2, max_length=2)]]


class MapMesh(Open):
    """The mesh a calibration map was made on."""

    kind: str
    rows: Count
    cols: Count
    n_tbus: Count
    n_heaters: Count


class MapTbu(Open):
    """A TBU's fitted passive phase difference, and whether it failed or could not be confirmed."""

    name: str
    delta_rad: float = Field(description="passive differential phase (rad), |delta| <= 4 pi")
    sigma_delta_rad: float | None = None
    failed: Literal["dead", "bar", "cross", "unverified", "open-heater", "shorted-heater"] | None = Field(
        None, description="broken (dead, stuck bar/cross; version 3: a heater the electrical read-back "
        "found open or shorted) or unverified (its fit disagrees with an independent light path, "
        "version 2): never driven, routed around")
    disagreement_rad: float | None = Field(
        None, description="unverified TBUs: measured phase disagreement (rad); null when no path "
        "showed a fringe or none reached the TBU (unverified_reason says which)")
    unverified_reason: Literal["no-light-path", "no-fringe", "disagrees"] | None = Field(
        None, description="unverified TBUs (maps since session 39; older maps omit it): why light did "
        "not confirm the fit: no light path avoiding the failed and doubtful TBUs reaches it (not looked "
        "at, not found dark), a lit path showed no fringe, or a measured disagreement (disagreement_rad)")
    common_rad: float | None = Field(
        None, description="version 4, phase-calibrated maps (every TBU or none): the TBU's common "
        "arm phase (rad) measured by interference (calibration.common_phase); null where no light "
        "could tell it. A map without it is power-only")


class MapHeater(Open):
    """A heater's fitted phase law phi = rho2 I^2 + rho3 I^3 (I in mA) and its efficiency."""

    channel: Channel
    rho2: float
    rho3: float
    eta_rad_per_mw: float
    fault: Literal["open-heater", "shorted-heater"] | None = Field(
        None, description="version 3: the electrical read-back found this heater open (draws no current) "
        "or shorted (no voltage across it); its TBU is failed with the same kind")


class MapCrosstalk(Open):
    """The sparse crosstalk matrix: rows of [victim heater, aggressor heater, rad per mW]."""

    entries: list[list[float]]
    nearest_fraction: float | None = None
    cutoff_tbu: float | None = None


class CalibrationFile(Open):
    """``lumion.calibration`` v4 (v1-v3 still read, as power-only maps): a fitted heater map tied
    to one chip.
    """

    schema_name: Literal["lumion.calibration"] = Field(alias="schema")
    version: Literal[1, 2, 3, 4]
    chip_id: str
    created: str | None = None
    mesh: MapMesh
    tbus: list[MapTbu]
    heaters: list[MapHeater]
    crosstalk: MapCrosstalk
    quality: dict[str, object] | None = None


class CheckpointFile(Open):
    """``lumion.calibration-checkpoint`` v1: a calibration run's progress, to resume it."""

    schema_name: Literal["lumion.calibration-checkpoint"] = Field(alias="schema")
    version: Literal[1]
    chip_id: str
    mesh: object
    operations: Count
    duration_s: Seconds
    tbus: dict[str, dict[str, object]]
    crosstalk: dict[str, dict[str, object]] = Field(default_factory=dict)


class Pad(Open):
    """A bond pad: heater pads carry a channel, TBU and arm; ground pads a null channel and TBU."""

    pad: str
    channel: Channel | None
    tbu: str | None
    arm: Literal["top", "bot", "gnd"] | None = Field(description="gnd for a ground pad")
    x: float = Field(description="µm")
    y: float = Field(description="µm")
    edge: str


class PadMapFile(Open):
    """``lumion.padmap`` v1: the layout's pads for wire bonding (``lumion layout``)."""

    schema_name: Literal["lumion.padmap"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    pads: list[Pad]


PositiveNumber = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(ge=1, le=65535)]  # slots, channels, outputs (instruments.config)


class HeaterDriverSection(Open):
    """``[heater_driver]``: the Qontrol-protocol driver and its safety limits."""

    driver: Literal["qontrol"] = "qontrol"
    address: str = Field(description='a serial device, a pty, "sim" or lumionsim://NAME')
    protocol: Literal["binary", "ascii"] = "binary"
    max_current_ma: PositiveNumber = 24.0
    max_total_power_mw: PositiveNumber = 1000.0
    baudrate: Annotated[int, Field(ge=50, le=12_000_000)] = 115200
    verify: Literal["last", "all"] = Field("last", description="which channels of a vector setting are "
                                           "read back in its own exchange (lumion program --verify)")


class LaserSection(Open):
    """``[laser]``: the SCPI laser (and an optional optical switch in front of the mesh)."""

    driver: Literal["keysight-8164"] = "keysight-8164"
    address: str
    idn: str | None = None
    switch_slot: PositiveInt = 1
    switch_channel: PositiveInt = 1
    switch_outputs: PositiveInt = 64
    switch: dict[str, PositiveInt] | None = Field(None, description="mesh port -> switch output")


class PowerMeterSection(Open):
    """``[power_meter]``: the SCPI power meter and which head reads which port."""

    driver: Literal["keysight-816x"] = "keysight-816x"
    address: str
    idn: str | None = None
    channels: dict[str, Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]] | None = Field(
        None, description="mesh port -> [slot, channel]")


class TransceiverSection(Open):
    """``[[transceivers]]``: a transceiver's management interface and its lanes' mesh ports."""

    name: str | None = None
    spec: str | None = None
    address: str | None = None
    tx_ports: list[Annotated[int, Field(ge=0)] | str] = Field(default_factory=list)
    rx_ports: list[Annotated[int, Field(ge=0)] | str] = Field(default_factory=list)
    monitor_period_s: float | None = Field(
        None, gt=0, le=1.0, description="how often the module samples its monitors (s, its datasheet's); "
        "light verification waits that long after a TX disable (not given: 0.1 s, the slowest)")


class SimSection(Open):
    """``[sim]``: settings of the simulated bench (read only when an address is "sim")."""

    seed: Annotated[int, Field(ge=0)] = 0
    crosstalk_fraction: float = Field(0.01, ge=0, lt=1)
    heater_link: Literal["pty", "url"] = "pty"
    chip: Literal["realistic", "ideal"] = Field(
        "realistic", description="simulated chip model (docs/calibration.md, 'The simulated chip')")


class ServerSection(Strict):
    """``[server]``: the ``lumion bench serve`` process serving the file's simulated addresses."""

    pid: int = Field(ge=1, description="its process id; a file whose process is gone is refused "
                     "(its addresses died with it)")
    host: str = Field(description="the machine it runs on (socket.gethostname()); pid is only checked there")


class BenchFile(Open):
    """``lumion.bench`` v1 (TOML): each instrument's driver and address (``instruments.config``)."""

    schema_name: Literal["lumion.bench"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec = "smartlight"
    chip_id: str | None = None
    heater_driver: HeaterDriverSection
    laser: LaserSection
    power_meter: PowerMeterSection
    transceivers: list[TransceiverSection] = Field(default_factory=list)
    sim: SimSection | None = None
    server: ServerSection | None = None


class JobPhase(Open):
    """A ``[[phase]]`` of a job: named circuits (links, rings over groups, or all-to-all)."""

    name: str | None = None
    kind: str = "links"
    links: list[Annotated[list[str], Field(min_length=2, max_length=2)]] | None = None
    groups: list[list[str]] | None = None
    accelerators: list[str] | None = None


class JobSection(Open):
    """``[job]``: the job's name, optional fabric file and accelerators."""

    name: str | None = None
    fabric: str | None = None
    accelerators: list[str] | None = None


class JobFile(Open):
    """A phased job (TOML, ``lumion phases``): its phases in order. ``schema``/``version`` optional."""

    schema_name: Literal["lumion.job"] | None = Field(None, alias="schema")
    version: Literal[1] | None = None
    job: JobSection = Field(default_factory=JobSection)
    phase: list[JobPhase] = Field(min_length=1)


Send = Annotated[list[Annotated[int, Field(ge=0)]],
                 Field(min_length=3, max_length=3, description="[source rank, destination rank, chunk]")]


class CollectiveStep(Open):
    """One step of a collective: the sends that happen at once."""

    label: str | None = None
    op: str | None = None
    sends: list[Send]


class CollectiveStepsFile(Open):
    """``lumion.collective-steps`` v1 (TOML or JSON): a TACCL-style step file for ``lumion collective``.

    Written from the collective engineer's examples (examples/allreduce-ring-4.toml); its
    loader is the authority.
    """

    schema_name: Literal["lumion.collective-steps"] = Field(alias="schema")
    version: Literal[1]
    name: str | None = None
    collective: str
    ranks: Annotated[int, Field(ge=1)]
    chunks: Annotated[int, Field(ge=1)] | None = None
    step: list[CollectiveStep] = Field(min_length=1)


class RackMesh(Open):
    """A mesh of the rack: its name and spec."""

    name: str
    spec: MeshSpec


class RackAccelerator(Open):
    """An accelerator: its mesh and the ports of its lanes (lane k = tx[k] -> mesh -> rx[k])."""

    name: str
    mesh: str
    tx: list[PortName]
    rx: list[PortName]
    spare: bool = False


class RackFibre(Open):
    """A fibre between two meshes' ports (``<mesh>/port:<n>``), with its loss and amplifier gain (dB)."""

    name: str
    a: str
    b: str
    loss_db: float | None = None
    coupling_db: float | None = None
    gain_db: float | None = None


class RackFile(Open):
    """``lumion.rack`` v1 (TOML): meshes joined by fibres and the accelerators on them (``lumion rack``).

    Written from the rack engineer's example (examples/rack-two-smartlight.toml); its
    loader is the authority.
    """

    schema_name: Literal["lumion.rack"] = Field(alias="schema")
    version: Literal[1]
    name: str | None = None
    transceiver: str | None = None
    required_margin_db: float | None = None
    baseline: str | None = Field(None, description="the fixed topology compared with: ring or torus:RxC")
    mesh: list[RackMesh] = Field(min_length=1)
    accelerator: list[RackAccelerator] = Field(min_length=1)
    fibre: list[RackFibre] = Field(default_factory=list)


# schema name (or name@version when one name has several versions) -> model
DATA_FILES = {
    "lumion.mesh": MeshFile,
    "lumion.state": StateFile,
    "lumion.configuration": ConfigurationFile,
    "lumion.configuration@1": ConfigurationV1,
    "lumion.fabric": FabricFile,
    "lumion.calibration": CalibrationFile,
    "lumion.calibration-checkpoint": CheckpointFile,
    "lumion.padmap": PadMapFile,
    "lumion.bench": BenchFile,
    "lumion.job": JobFile,
    "lumion.collective-steps": CollectiveStepsFile,
    "lumion.rack": RackFile,
}

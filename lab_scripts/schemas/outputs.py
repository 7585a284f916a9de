"""Models of every ``lumion COMMAND --json`` output (one object, ``schema`` = ``lumion.COMMAND``).

The JSON Schemas in ``lab_scripts/schemas/json/`` are generated from these models
(``python -m lab_scripts.schemas``); tests run each command and validate its output.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lab_scripts.schemas.files import ConfigurationFile, JobLinks, StateFile
from lab_scripts.schemas.types import (
    Channel,
    Count,
    Db,
    DbOrNull,
    Fingerprint,
    MeshSpec,
    Ms,
    Path,
    PortName,
    Seconds,
    Strict,
    TbuName,
    TbuState,
)

# How calibration names a TBU it could not use (calibration.map.FAILURE_STATES).
FailedState = Literal["dead", "bar", "cross", "unverified", "open-heater", "shorted-heater"]


class ErrorOutput(Strict):
    """Any command's failure with ``--json`` (docs/cli.md); the exit status follows ``kind``."""

    schema_name: Literal["lumion.error"] = Field(alias="schema")
    version: Literal[1]
    error: str = Field(description="what went wrong, one line")
    kind: Literal["usage", "input", "impossible", "instrument", "unverified", "refused", "unavailable",
                  "bug", "interrupted"]
    hint: str = Field(description="what to do, one sentence")
    type: str = Field(description="the exception class the failure came from")
    exit_code: int = Field(description="the process exit status (2 input, 3 impossible, 4 instrument, "
                                       "5 unverified, 6 refused, 64 usage, 69 unavailable, 70 bug, "
                                       "130 interrupted)")
    command: str = Field(description="lumion or lumion COMMAND")


class HeaterRef(Strict):
    """One heater: its driver channel, its TBU and the arm it sits on."""

    channel: Channel
    tbu: TbuName
    arm: Literal["top", "bot"]


class MeshLink(Strict):
    """A waveguide link between two TBU ends."""

    from_: str = Field(alias="from", description="<TBU>/<a0|a1|b0|b1>")
    to: str


class TbuEnds(Strict):
    """A TBU's two ends in the drawing."""

    a: list[float] = Field(min_length=2, max_length=2)
    b: list[float] = Field(min_length=2, max_length=2)


class MeshGeometry(Strict):
    """Drawing coordinates of every TBU (unit: one TBU length)."""

    unit: Literal["tbu_length"]
    tbus: dict[str, TbuEnds]


class MeshOutput(Strict):
    """``lumion mesh --json``: a mesh's size and port names; with ``--full`` also its TBUs, heater
    channels, links and drawing (version 2: version 1 always printed all of it).
    """

    schema_name: Literal["lumion.mesh-info"] = Field(alias="schema")
    version: Literal[2]
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    kind: str = Field(description="hexagonal, square, triangular or custom")
    rows: Count
    cols: Count
    n_tbus: Count
    n_ports: Count
    n_heaters: Count
    n_links: Count
    ports: list[PortName]
    full: bool = Field(description="whether the lists below are here (lumion mesh --json --full)")
    tbus: list[TbuName] | None = Field(None, description="--full only")
    heaters: list[HeaterRef] | None = Field(None, description="--full only")
    links: list[MeshLink] | None = Field(None, description="waveguide links between TBU ends; --full only")
    port_sides: dict[str, str] | None = Field(None, description="port name -> the TBU end it is "
                                              "(<TBU>/<a0|a1|b0|b1>); --full only")
    geometry: MeshGeometry | None = Field(None, description="--full only")


class SimulateOutput(Strict):
    """``lumion simulate --json``: output power per port for light into one port."""

    schema_name: Literal["lumion.simulate"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    input: PortName
    wavelengths_nm: list[float] = Field(min_length=1, description="nm, ascending")
    outputs_db: dict[str, list[DbOrNull]] = Field(
        description="port -> power (dB re the input) per wavelength")
    total_db: list[DbOrNull] = Field(description="all ports summed (dB) per wavelength")
    plot: Path | None = Field(description="the spectrum plot written, or null")


class HopState(Strict):
    """A TBU on a route and the state the route asks of it."""

    tbu: TbuName
    state: TbuState


class RouteResult(Strict):
    """One verified route: model loss, circuit-solve transmission and leakage, link budget."""

    src: PortName
    dst: PortName
    tbus: list[HopState]
    loss_db: Db = Field(description="sum of the TBU and link losses on the path (dB)")
    transmission_db: Db = Field(description="circuit-solve power at dst for light into src (dB), worst "
                                            "over the lane's wavelengths")
    acr_db: DbOrNull = Field(description="attenuation-to-crosstalk ratio: transmission - worst leak (dB)")
    acr_wavelength_nm: float | None = Field(
        description="where the ACR is worst among the wavelengths checked (nm); null with no victim port")
    n_wavelengths: int = Field(ge=1, description="wavelengths the route was checked at: every channel of the "
                                                 "transceiver lane across its slot")
    worst_leak_db: DbOrNull = Field(description="strongest leak from src into another output (dB)")
    leak_in_db: DbOrNull = Field(description="strongest light from other inputs into dst (dB)")
    margin_db: Db = Field(description="link-budget margin above the receiver sensitivity (dB)")
    budget_ok: bool


class RouteOutput(Strict):
    """``lumion route --json``: the plan and the configuration that realises it."""

    schema_name: Literal["lumion.route"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    transceiver: str = Field(description="the lane profile the link budget used")
    plot: Path | None
    method: Literal["fast", "exact"]
    optimal: bool
    objective: Literal["total", "worst"]
    failed: dict[str, Literal["dead", "bar", "cross"]] = Field(description="TBU name -> how it failed")
    map_avoided: dict[str, str] = Field(
        default_factory=dict, description="with --map: each TBU the calibration map records failed or "
        "unverified and routing avoided, by name -> how the map records it (for an unverified TBU, what "
        "light showed: calibration.settable.recorded_as)")
    routes: list[RouteResult]
    configuration: ConfigurationFile


class LayoutOutput(Strict):
    """``lumion layout --json``: the GDS and pad map written and the chip's size."""

    schema_name: Literal["lumion.layout"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    gds: Path
    pad_map: Path = Field(description="the pad map as CSV")
    pad_map_json: Path = Field(description="the pad map as lumion.padmap JSON")
    plot: Path | None = Field(description="the PNG picture of the layout, or null")
    plot_tbu: Path | None = Field(description="the zoomed picture of one TBU beside it, or null")
    fiber_io: Literal["ring", "grating-edge", "edge-coupler"] = Field(
        description="where the couplers are: four sides, or one west column (gratings or a facet)")
    cell: str = Field(description="gdsfactory cell name")
    n_tbus: Count
    n_ports: Count
    n_pads: Count = Field(description="heater and ground pads")
    n_heater_pads: Count
    size_um: list[float] = Field(min_length=2, max_length=2, description="[width, height] in µm")
    gds_bytes: Count
    wire_width_um: float = Field(gt=0, description="heater wire width (µm)")
    ground_width_um: float = Field(gt=0, description="ground bus width (µm)")
    max_line_resistance_ohm: float = Field(ge=0, description="longest heater line's resistance (ohm)")
    max_ground_drop_v: float = Field(ge=0, description="worst voltage drop on the shared ground (V)")
    ground_current_ma: float = Field(ge=0, description="ground current at full drive (mA)")
    routing_sheet_ohm_sq: float = Field(gt=0, description="routing metal sheet resistance (ohm/sq)")
    ground_sheet_ohm_sq: float = Field(gt=0, description="ground metal sheet resistance (ohm/sq)")
    import_s: Seconds = Field(description="importing gdsfactory and activating its PDK (s)")
    build_s: Seconds = Field(description="drawing the cell (s)")


class BenchOutput(Strict):
    """``lumion bench serve --json``: where each simulated instrument answers (printed once)."""

    schema_name: Literal["lumion.bench-serve"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    chip_id: str
    heater_driver: str = Field(description="pseudo-terminal path of the heater driver")
    heater_driver_url: str = Field(description="in-process lumionsim:// URL of the same driver")
    laser: str = Field(description="VISA resource of the laser")
    power_meter: str = Field(description="VISA resource of the power meter")
    transceivers: dict[str, str] = Field(description="name -> serial-i2c:<pty> bridge address")
    config: Path | None = Field(description="the bench config written by --write-config (removed again "
                                "when the server stops), or null")
    pid: int = Field(ge=1, description="the serving process: `kill PID` stops it; the config's "
                     "[server] pid names it too")


class ProgramTbus(Strict):
    """How many TBUs the programmed configuration puts in each state."""

    bar: Count
    cross: Count
    split: Count


class RouteVerification(Strict):
    """One programmed route measured by light (dB; measured and difference null when it could not be)."""

    route: str = Field(description="source->destination port names")
    planned_loss_db: float = Field(description="circuit solve of the configuration (ideal TBUs)")
    measured_loss_db: float | None = Field(description="laser (0 dBm) minus the meter reading, or null")
    difference_db: float | None = Field(description="measured - planned, or null")
    planned_acr_db: float | None = Field(
        description="the plan's ACR at the check's wavelength: its power over the worst victim's (the other "
        "routes' destinations, every other port for a lone route) (dB); null when not measured")
    measured_acr_db: float | None = Field(description="the same ratio read by the meter (dB), or null")
    worst_victim: str = Field(
        description="the victim port the measured ACR is set by ('' when none measured)")
    unmetered_victims: list[str] = Field(
        description="victim ports with no meter head: crosstalk there unseen")
    status: Literal["ok", "off", "unverified"] = Field(
        description="off: the loss differs from the plan by more than tolerance_db, or the measured ACR "
        "is under min(20 dB, planned - 3 dB)")
    reason: str = Field(description="why it was not measured, or why its ACR is off ('' otherwise)")


class ProgramVerification(Strict):
    """``lumion program``'s check by light of every route (docs/instruments.md)."""

    status: Literal["ok", "off", "unverified", "skipped"] = Field(
        description="off: a route differs from its plan by more than tolerance_db (exit 5); unverified: "
        "some route could not be measured; skipped: --no-verify")
    tolerance_db: float
    wavelength_nm: float
    routes: list[RouteVerification]
    dark: str | None = Field(
        None, description="why the source is taken as dark (the laser reports its output off, or no head "
        "read light from any input: instruments.dark_source); status is then off and the routes' readings "
        "are not the chip's; null when light was seen")


class StatePortReading(Strict):
    """One output port lit from one input (fractions of the input's power)."""

    port: PortName
    predicted: float
    measured: float
    difference: float = Field(description="measured - predicted")


class StateInputCheck(Strict):
    """One input of a programmed heater state, lit at one wavelength, every other metered port read."""

    port: PortName
    wavelength_nm: float
    status: Literal["ok", "off", "unverified"]
    reason: str = Field(description="why it could not be confirmed ('' when it was)")
    worst: StatePortReading | None = Field(description="the port farthest from the prediction; null when "
                                           "nothing was read")
    off_ports: list[PortName] = Field(description="ports off by more than the tolerance")
    predicted_total: float = Field(description="power predicted out of every port (fraction of the input)")
    measured_total: float | None = Field(description="power read out of the metered ports, or null")
    ports: list[StatePortReading] = Field(description="ports carrying at least 1e-3 of the input "
                                          "(predicted or measured), and every port off")


class StateBlindArm(Strict):
    """A used TBU's arm whose pi error the check by light could not see (on the map's model)."""

    tbu: TbuName
    arm: Literal["top", "bottom"]
    largest_change: float = Field(description="the largest reading a pi error on this arm moves (fraction "
                                  "of the input power), at most pi_visible")


class StateVerification(Strict):
    """``lumion program``'s check by light of a heater state (docs/synthesis.md)."""

    status: Literal["ok", "off", "unverified", "skipped"] = Field(
        description="off: a port differs from the prediction by more than tolerance (exit 5); unverified: "
        "some input or light could not be measured, or some used TBU's pi error could not be seen "
        "(not_verifiable); skipped: --no-verify")
    check: Literal["state"]
    tolerance: float = Field(description="largest difference at a port (fraction of the input power)")
    pi_visible: float = Field(description="a pi error on one arm counts as seen by this check when the map's "
                              "model says it moves some checked reading by more than this (the tolerance "
                              "plus a right state's worst reading)")
    chip: str = Field(description="the chip model the prediction was made on")
    prediction: Literal["synthesis", "map"] | None = Field(
        description="synthesis: the state file's own prediction; map: the map's model of the state (the "
        "file carries none); null when skipped")
    wavelengths_nm: list[float] = Field(description="where light was checked (a filter: its centre and a "
                                        "point on its slope each side); empty when skipped")
    inputs: list[StateInputCheck] = Field(description="one per input and wavelength")
    not_verifiable: list[StateBlindArm] = Field(description="used TBUs' arms a pi error on which moves no "
                                                "checked reading by more than pi_visible (named, never ok)")
    dark: str | None = Field(
        None, description="why the source is taken as dark (the laser reports its output off, or no head "
        "read light from any input: instruments.dark_source); status is then off; null when light was seen")


class ProgramHeaterFault(Strict):
    """A driven heater the read-back after ``lumion program``'s write shows open or shorted."""

    channel: Channel
    tbu: TbuName
    arm: Literal["top", "bottom"]
    kind: Literal["open-heater", "shorted-heater"]
    milliamps: float = Field(description="current read back (mA)")
    volts: float = Field(description="voltage read back (V)")


class ProgramRouteBudget(Strict):
    """One route's link budget as ``lumion program`` checked it before writing (dB)."""

    route: str = Field(description="source->destination port names")
    margin_db: float | None = Field(description="received power above the lane's receiver sensitivity at the "
                                    "route's worst wavelength of the lane (the circuit solve of the "
                                    "configuration as intended), also for a route not held to it; null "
                                    "when no lane was known (a lumion.plan without --transceiver)")
    status: Literal["ok", "not checked"] = Field(
        description="ok: at least required_margin_db (a route below it is refused, exit 3, nothing sent); "
        "not checked: see not_checked")


class ProgramBudget(Strict):
    """``lumion program``'s link-budget check of a configuration, before anything is sent
    (lab_scripts/program_budget.py: the check lumion route refuses plans by).
    """

    transceiver: str | None = Field(description="the lane profile every route was held to; null for a "
                                    "lumion.plan without --transceiver (its lanes are its fabric's)")
    lane_from: Literal["--transceiver", "file", "default"] | None = Field(
        description="where the lane came from: --transceiver, the lumion route --json file's own "
        "transceiver, or lumion route's default lane (dwdm-10g-zr)")
    required_margin_db: float | None = Field(description="the margin a route must keep (dB); null when "
                                             "nothing was checked")
    routes: list[ProgramRouteBudget]
    not_checked: str | None = Field(description="why some routes were held to no lane (split light with no "
                                    "lane named, a lumion.plan's fabric lanes); null when all were")


class ProgramOutput(Strict):
    """``lumion program --json``: what was written to the heater driver."""

    schema_name: Literal["lumion.program"] = Field(alias="schema")
    version: Literal[1]
    chip_id: str
    mesh: MeshSpec
    mesh_fingerprint: Fingerprint
    map: str = Field(description="ideal, or the calibration map file")
    programmed: Literal["configuration", "state"] = Field(
        description="a configuration, or a heater state (lumion.state) set through a phase-calibrated map")
    channels: Count = Field(description="heaters written")
    commands: Count
    bytes_written: Count
    bytes_read: Count
    wire_time_s: Seconds = Field(description="modelled time on the wire (s)")
    elapsed_s: Seconds = Field(description="measured here (s)")
    n_tbus_by_state: ProgramTbus | None = Field(description="a configuration's TBUs by state; null for a "
                                                "heater state")
    heater_faults: list[ProgramHeaterFault] = Field(
        default_factory=list, description="driven heaters whose voltage and current read-back after the "
        "write shows them open or shorted (each also one stderr line; the command then exits 5)")
    verification: ProgramVerification | StateVerification
    budget: ProgramBudget | None = Field(
        None, description="a configuration's link-budget check before the write; null for a heater state")


class HeaterSetting(Strict):
    """A heater a recovery writes and the value it gets (``heater_unit``: mA or rad)."""

    channel: Channel
    heater: str
    current_ma: float | None = Field(None, description="the current written (heater_unit mA)")
    phase_rad: float | None = Field(None, description="the heater phase written (heater_unit rad: no map)")


class TimingMs(Strict):
    """A recovery's modelled timing breakdown (ms)."""

    detect: Ms
    compute: Ms
    write: Ms
    settle: Ms
    relock: Ms
    verify: Ms
    total: Ms


class FailoverLink(Strict):
    """One link of the job after a recovery."""

    link: str = Field(description="<tx accelerator>-><rx accelerator>")
    src: PortName
    dst: PortName
    n_tbus: Count
    loss_db: Db
    transmission_db: Db
    acr_db: DbOrNull
    margin_db: Db
    budget_ok: bool


class Candidate(Strict):
    """A spare considered for the splice."""

    spare: str | None
    spares: dict[str, str] = Field(description="failed accelerator -> spare it would get")
    ok: bool
    worst_new_loss_db: DbOrNull = None
    worst_new_margin_db: DbOrNull = None
    all_links_close: bool | None = None
    n_changed_tbus: Count | None = Field(None, description="TBUs this option would change")
    n_moved_links: Count | None = Field(None, description="held links this option would move")
    reason: str | None = None


class MovedLink(Strict):
    """A held link the fewest-moves fallback moved (the recovery was not hitless)."""

    link: str = Field(description="<tx accelerator>-><rx accelerator>")
    old_route: dict[str, Any] = Field(description="its route before (lumion route format)")
    new_route: dict[str, Any] = Field(description="its route after")


class LightLink(Strict):
    """One link of a recovered plan as planned and as measured (dBm at the meter that read it)."""

    link: str = Field(description="<tx accelerator>-><rx accelerator>")
    rerouted: bool = Field(description="a new link (its own transmitter's light is what is judged)")
    meter: Literal["transceivers", "power meter"] | None = Field(description="null: not measured")
    planned_dbm: float | None
    measured_dbm: float | None
    difference_db: float | None = Field(description="measured minus planned")
    before_dbm: float | None = Field(description="a held link's reading before the recovery")
    change_db: float | None = Field(description="a held link's change across the recovery")
    others_dbm: float | None = Field(
        description="a new link's receiver read with its own transmitter dark: every other transmitter's "
        "light there (dBm); null when not read")
    acr_db: float | None = Field(description="measured_dbm - others_dbm (dB), or null")
    status: Literal["ok", "off", "hit", "not measured"] = Field(
        description="off: more than tolerance_db from plan, or acr_db under 20 dB (photonics.tolerances."
        "MIN_ACR_DB); hit: held, moved more than held_tolerance_db")
    off_before: bool = Field(description="a held link already off its plan before the recovery")
    reason: str = Field(description="why it was not measured; for a measured link, why its reading is not "
                        "the mesh's (its transmitter's monitor reads it dark); '' otherwise")


class LightVerification(Strict):
    """What light said of every link of a plan (photonics.fabric.verify.summary)."""

    status: Literal["ok", "off", "not measured", "partly measured"]
    tolerance_db: Db = Field(description="photonics.tolerances.ROUTE_TOL_DB")
    held_tolerance_db: Db = Field(description="photonics.tolerances.HELD_TOL_DB")
    meters: list[str]
    links_off: list[str]
    not_measured: list[str]
    hitless_by_light: bool | None = Field(
        description="null when no held link could be judged: none measured, or each one dark or off its plan "
        "before the recovery")
    held_change_db: float | None
    dark: str | None = Field(
        None, description="the meter's source sent no light (the bench laser reports its output off, or no "
        "head read light from any source lit: instruments.dark_source): the links it reads are not measured "
        "and status is off -- light was not seen, as lumion program says it; null otherwise")
    links: list[LightLink]


class LightAttempt(LightVerification):
    """One attempt of the verify stage: the TBUs it avoided and, when refused, what light blamed."""

    attempt: Count
    avoided: list[TbuName]
    suspect_tbus: list[TbuName] | None = None
    refusal: str | None = None


class Recovery(Strict):
    """One failover: the spare chosen, what changed, the links and the timing."""

    failed: str
    spare: str | None
    spares: dict[str, str]
    policy: str
    hitless: bool
    job: JobLinks
    rerouted_links: list[str]
    moved_links: list[MovedLink]
    changed_tbus: list[TbuName]
    changed_heaters: list[HeaterSetting]
    heater_unit: Literal["mA", "rad"]
    unaffected_routes_unchanged: bool
    held_heater_drift: float
    links: list[FailoverLink]
    timing_ms: TimingMs
    candidates: list[Candidate]
    verified: Literal["by light", "partly", "not measured", "off"] | None = Field(
        None, description="what light said of the recovery (lumion failover; absent in lumion demo's)")
    verification: LightAttempt | LightVerification | None = None
    light_attempts: list[LightAttempt] | None = Field(None, description="each attempt of the verify stage")
    suspect_tbus: list[TbuName] | None = Field(None, description="TBUs a repair routed around")


class FailoverOutput(Recovery):
    """``lumion failover --json``: the last recovery at the top level, every recovery in ``failovers``."""

    schema_name: Literal["lumion.failover"] = Field(alias="schema")
    version: Literal[1]
    fabric: str
    failovers: list[Recovery]
    plot: list[Path] = Field(description="the mesh after the last recovery and the recovery timeline")
    plan: Path | None = Field(description="the lumion.plan file written by --out, or null")
    worst_margin_db: Db
    placement_verification: LightVerification | None = Field(
        description="the placed (or loaded) plan's links read on --bench before any failure; null without")


class Matching(Strict):
    """One configuration of an all-to-all schedule."""

    pairs: list[list[PortName]]
    worst_loss_db: Db
    worst_transmission_db: Db
    worst_acr_db: DbOrNull
    worst_margin_db: Db
    reciprocity_error_db: Db
    split: bool
    configuration: ConfigurationFile = Field(description="this step's configuration (for lumion program)")
    configuration_file: Path | None = Field(description="where --out wrote it, or null")


class ScheduleOutput(Strict):
    """``lumion schedule --json``: conflict-free configurations covering every port pair."""

    schema_name: Literal["lumion.schedule"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    ports: list[PortName]
    n_ports: Count
    count: Count = Field(description="configurations")
    lower_bound: Count
    overhead: Count
    labelings_tried: Count
    method: Literal["circle", "search", "split"] = Field(
        description="circle: a circle-method labeling reached the bound; search: the 1-factorization "
        "search did; split: neither, unroutable matchings were split (overhead > 0)")
    search_checks: Count = Field(description="matchings the search routed (0: no search ran)")
    compute_s: Seconds = Field(description="computing time (s)")
    worst_loss_db: Db
    worst_acr_db: DbOrNull
    configurations: list[Matching]
    out: Path | None = Field(description="the file written by --out, or null")


class SwitchMs(Strict):
    """The modelled time to switch into one configuration (ms)."""

    write: Ms
    settle: Ms
    relock: Ms
    verify: Ms
    total: Ms


class PhaseStep(Strict):
    """One configuration of a phased job."""

    phase: str
    step: str
    links: list[str]
    worst_loss_db: Db
    worst_margin_db: Db
    worst_acr_db: DbOrNull
    n_changed_tbus: Count = Field(description="TBUs whose state changes into this step")
    n_changed_heaters: Count = Field(description="heater channels written into this step")
    switch_ms: SwitchMs
    configuration: ConfigurationFile = Field(description="this step's configuration (for lumion program)")
    configuration_file: Path | None = Field(description="where --out wrote it, or null")


class PhasesOutput(Strict):
    """``lumion phases --json``: the configurations of a phased job and the switches between them."""

    schema_name: Literal["lumion.phases"] = Field(alias="schema")
    version: Literal[1]
    job: str
    fabric: str
    cyclic: bool
    configurations: list[PhaseStep]
    cycle_switch_ms: Ms
    out: Path | None = Field(description="the file written by --out, or null")


class VerifiedRoute(Strict):
    """A route measured after calibration, with and without crosstalk compensation."""

    src: PortName
    dst: PortName
    n_tbus: Count = Field(description="TBUs the route crosses")
    transmission_db: Db
    acr_db: DbOrNull
    acr_uncompensated_db: DbOrNull
    transmission_uncompensated_db: Db


class CalibrateDrift(Strict):
    """The chip's drift the reference TBUs saw during a calibration (``calibration.drift``)."""

    reference_tbus: list[TbuName] = Field(description="TBUs read at fixed heater states through the run")
    reference_rounds: Count = Field(description="rounds of reference readings")
    reference_operations: Count = Field(description="set-and-read operations the references cost")
    drift_seen_rad: float = Field(description="largest change of any reference over the run (rad)")
    drift_rad_per_min: float = Field(description="the fastest reference's average rate (rad/min)")
    drift_k_per_min: float | None = Field(
        description="the run's temperature rate, kelvin-equivalent at 0.03 rad/K (K/min); null when "
        "too few TBUs showed their drift coefficient")
    drift_compensated_tbus: Count = Field(description="TBUs whose map phase was corrected for the drift")
    drift_move_after_confirm_rad: float = Field(
        description="how far the fastest TBUs move while the compensated map is confirmed (rad); over "
        "0.05 the run is refused")


class CalibrateCommonPhase(Strict):
    """The common-phase stage of ``lumion calibrate --common-phase`` (``calibration.common_phase``)."""

    interferometers: Count = Field(description="interferometers measured (those spanning every "
                                   "observable common phase, plus checks)")
    operations: Count = Field(description="set-and-read operations the stage took")
    rms_residual_rad: float = Field(description="RMS of the fringes' positions against the fit (rad)")
    max_residual_rad: float = Field(description="largest of them (rad)")
    min_contrast: float = Field(description="smallest normalised fringe amplitude (0..1)")
    unseen: list[TbuName] = Field(description="TBUs on no interferometer's arm (common phase unknown)")


class CalibrateOutput(Strict):
    """``lumion calibrate --json``: the fit and, on the simulated bench, its error against the truth."""

    schema_name: Literal["lumion.calibrate"] = Field(alias="schema")
    version: Literal[1]
    chip_id: str
    out: Path
    n_tbus: Count = Field(description="TBUs of the chip")
    n_heaters: Count = Field(description="heaters calibrated")
    operations: Count
    duration_s: Seconds
    resumed_operations: Count
    fit_rms_residual: float = Field(description="RMS fit residual in noise sigmas")
    fit_rms_residual_rel: float = Field(description="RMS fit residual as a fraction of the fringe amplitude")
    worst_sigma_phase_2pi_rad: float
    crosstalk_fraction: float
    crosstalk_entries: Count
    crosstalk_entries_fitted: Count
    crosstalk_entries_assumed: Count
    crosstalk_rms_error: float | None = None
    crosstalk_rms_pull: float | None = None
    phase_rms_error_rad: float | None = None
    phase_max_error_rad: float | None = None
    phase_worst_heater_rms_rad: float | None = None
    delta_rms_error_rad: float | None = None
    delta_max_error_rad: float | None = None
    setpoint_rms_error_rad: float | None = None
    setpoint_max_error_rad: float | None = None
    routes: list[VerifiedRoute] | None = None
    min_acr_db: DbOrNull = None
    min_acr_uncompensated_db: DbOrNull = None
    verify_operations: Count | None = None
    plot: list[Path] | None = Field(None, description="fringe-fit and overview pictures (--plot DIR)")
    failed_tbus: dict[str, FailedState] = Field(
        default_factory=dict, description="TBUs calibration found broken (dead, stuck, or a heater the "
        "electrical read-back found open or shorted) or could not confirm by light, by name: routing "
        "avoids them")
    unverified_tbus: dict[str, float | None] = Field(
        default_factory=dict, description="TBUs light did not confirm, by name -> measured disagreement "
        "(rad; null: not confirmed by light, no path to it or no fringe through one: calibration.settable."
        "NOT_CONFIRMED); the command then exits 5")
    unverified_reasons: dict[str, Literal["no-light-path", "no-fringe", "disagrees"] | None] = Field(
        default_factory=dict, description="the same TBUs -> why light did not confirm them, as the map "
        "records it (unverified_reason): no-light-path (no light path avoiding the failed and doubtful "
        "TBUs reaches it: not looked at, not found dark), no-fringe (a lit path showed no fringe), "
        "disagrees (unverified_tbus gives by how much)")
    confirmed_tbus: Count | None = Field(None, description="TBUs whose map phase light confirmed")
    confirmed_on_independent_path: Count | None = Field(
        None, description="of those, confirmed through a light path other than their fit's")
    confirm_max_disagreement_rad: float | None = Field(
        None, description="largest disagreement (rad) between map and light among confirmed TBUs")
    drift_tracking: bool = Field(
        description="reference TBUs followed the chip's drift (off: --no-drift-tracking)")
    drift: CalibrateDrift | None = Field(
        None, description="the drift seen and compensated; null when not tracked or no reference was read")
    warnings: list[str] = Field(default_factory=list, description="one line per failed TBU or doubtful fit")
    common_phase: CalibrateCommonPhase | None = Field(
        None, description="--common-phase: the common-phase stage (docs/calibration.md, 'Common phases')")


class DemoChip(Strict):
    """The simulated chip the demo runs on."""

    chip_id: str
    n_tbus: Count
    n_ports: Count
    n_heaters: Count


class DemoCalibration(Strict):
    """Whether the demo calibrated, and how long it took (0 when the cached map was reused)."""

    calibrated: bool
    cached: Path | None = Field(None, description="the cached map file")
    elapsed_s: Seconds | None = None
    operations: Count | None = None


class DemoLink(Strict):
    """One ring link after the recovery: model margin and what the power meter read."""

    link: str
    rerouted: bool
    model_margin_db: Db
    measured_rx_dbm: float = Field(description="dBm")
    measured_margin_db: Db
    planned_rx_dbm: float = Field(
        description="dBm the plan expects (TX lane less facets, access and route loss)")
    difference_db: float = Field(description="measured minus planned received power (dB)")
    status: Literal["ok", "off"] = Field(description="off: more than verification.tolerance_db from plan")
    before_rx_dbm: float | None = Field(description="dBm before the failure; null for re-routed links")


class DemoVerification(Strict):
    """What light says of the recovery (the command exits 5 unless ``status`` is ok)."""

    status: Literal["ok", "off"]
    tolerance_db: Db = Field(description="photonics.tolerances.ROUTE_TOL_DB: a link further from plan is off")
    held_tolerance_db: Db = Field(description="a held link moving more than this (dB) is a hit")
    links_off: list[str] = Field(description="links more than tolerance_db from their plan")
    hitless_by_light: bool = Field(
        description="no held link's measured power moved by more than held_tolerance_db")
    summary: str


class DemoRing(Strict):
    """One hexagonal cell used as a ring resonator."""

    fsr_ghz: float | None
    expected_fsr_ghz: float
    extinction_db: Db


class DemoPlots(Strict):
    """The demo's pictures."""

    mesh_before: Path
    mesh_after: Path
    timeline: Path
    ring_spectrum: Path


class DemoOutput(Strict):
    """``lumion demo --json``: calibration, ring, failure, recovery, measured links, plots."""

    schema_name: Literal["lumion.demo"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    chip: DemoChip
    calibration: DemoCalibration
    fabric: str
    failover: Recovery
    links: list[DemoLink]
    held_links_power_change_db: Db = Field(description="largest change of a held link's measured power (dB)")
    all_links_close: bool
    verification: DemoVerification
    ring: DemoRing
    plot: DemoPlots
    elapsed_s: Seconds


# -- commands of the other engineers, modelled from their --json output of 2026-11-23 ------
# (collective, rack, serve): the lead re-checks them when those commands change.

class CollectiveInfo(Strict):
    """The collective as compiled: its pattern, ranks, chunks and steps."""

    name: str
    kind: str = Field(description="allreduce, alltoall, broadcast or allgather")
    n_ranks: Count
    n_chunks: Count
    n_steps: Count
    combine: bool
    lag_ms: dict[str, Ms] = Field(description="rank -> how late it joins (ms)")


class CollectiveCost(Strict):
    """The cost model's parameters."""

    alpha_ms: Ms = Field(description="latency per message hop (ms)")
    gbps: float = Field(gt=0, description="circuit rate (Gb/s)")
    relock_ms: Ms | None = Field(description="receiver re-lock per switch (ms); null: the lanes' own")


class CollectiveConfiguration(Strict):
    """One mesh configuration of the compiled collective."""

    index: Count
    links: list[str]
    worst_loss_db: Db
    worst_margin_db: Db
    trees: list[str] | None = Field(None, description="multicast trees ('gpu0->gpu1+gpu2'), only for a "
                                    "configuration of trees (--multicast)")


class CollectiveRound(Strict):
    """One step as scheduled: which configuration, direct or forwarded, and when (ms)."""

    step: Count
    label: str
    config: Count
    mode: Literal["direct", "forward", "multicast"]
    transfers: Count
    max_hops: Count
    switch_ms: Ms
    start_ms: Ms
    end_ms: Ms


class CollectiveOutput(Strict):
    """``lumion collective --json``: completion time on the mesh against fixed ring and torus."""

    schema_name: Literal["lumion.collective"] = Field(alias="schema")
    version: Literal[1]
    pattern: str
    accelerators: Count | None
    size_mb: float = Field(ge=0, description="buffer per rank (MB = 1e6 bytes)")
    collective: CollectiveInfo
    fabric: str
    mesh: MeshSpec
    ranks: list[str]
    size_bytes: float = Field(ge=0)
    cost: CollectiveCost
    completion_ms: Ms
    first_run_ms: Ms
    setup_ms: Ms
    switches: Count
    switch_ms: Ms
    multicast_rounds: Count = Field(description="rounds per run that ran on multicast trees (0 without "
                                    "--multicast)")
    n_configurations: Count
    n_rounds: Count
    fixed_ms: dict[str, Ms] = Field(description="fixed topology (ring, torus) -> completion time (ms)")
    configurations: list[CollectiveConfiguration]
    rounds: list[CollectiveRound]
    speedup_vs_fixed_ring: float
    point_to_point_ms: dict[str, Ms] | None = Field(
        None, description="--multicast: the same collective and its usual schedules compiled point to point")
    speedup_vs_point_to_point: float | None = Field(
        None, description="--multicast: the best point-to-point time over the multicast-enabled time")
    multicast_plan: Path | None = Field(
        None, description="--out: the lumion.multicast-plan file written (the first configuration of trees)")


class RackInfo(Strict):
    """The rack simulated: its meshes, accelerators and fibres."""

    name: str
    meshes: dict[str, MeshSpec]
    workers: Count
    spares: Count
    fibres: Count
    lanes: Count


class RackFailures(Strict):
    """The failure model (hours)."""

    mtbf_h: float | None = Field(description="mean time between failures per accelerator; null: none "
                                             "(--mtbf-h inf)")
    repair_h: float
    checkpoint_h: float
    restart_h: float
    recovery: Literal["requeue", "wait"] = Field(description="a failed job not spliced: re-queued from its "
                                                 "checkpoint, or waiting for the repair")


class RackStep(Strict):
    """The step model: a job's step is compute plus its collective on what it holds."""

    buffer_mb: float = Field(description="bytes per rank the collective moves per step, MB")
    compute_ms: Ms
    gbps: float = Field(description="payload rate of one lane")
    alpha_ms: Ms


class PolicyMetrics(Strict):
    """One policy's metrics over the trace (docs/rack.md defines them)."""

    policy: Literal["fabric", "baseline"]
    n_jobs: Count
    completed: Count
    rejected: Count
    accepted_immediately: float
    accepted_eventually: float
    queue_delay_mean_h: float
    queue_delay_p95_h: float
    fragmentation: float
    bandwidth_per_slice: float
    utilisation: float
    throughput_jobs_per_h: float
    goodput_acc_h_per_h: float
    goodput_fraction: float
    makespan_h: float
    failures: Count
    failures_in_jobs: Count
    splices: Count
    stalls: Count
    lost_work_acc_h: float
    step_rate: float = Field(description="mean over completed jobs of work per hour stepping "
                                         "(ideal slice: 1)")
    requeues: Count


class RackOutput(Strict):
    """``lumion rack simulate --json``: the photonic fabric against the static-ring baseline."""

    schema_name: Literal["lumion.rack.simulate"] = Field(alias="schema")
    version: Literal[1]
    rack: RackInfo
    trace: dict[str, str | int | None] = Field(description="source (synthetic or the file) and n_jobs")
    seed: Count
    queue: Literal["fifo", "backfill"]
    baseline_topology: str = Field(description="the fixed topology compared with: ring or torus:RxC")
    max_lanes: Count = Field(description="lanes the fabric may give a slice")
    failures: RackFailures
    step: RackStep | None = Field(description="null with --fixed-duration")
    fabric: PolicyMetrics
    baseline: PolicyMetrics
    change: dict[str, float | None] = Field(description="metric -> relative change fabric vs baseline; "
                                            "null where the baseline is 0")
    plot: Path | None


class ServeOutput(Strict):
    """``lumion serve --json``: printed once the service listens (it then serves until a signal)."""

    schema_name: Literal["lumion.serve"] = Field(alias="schema")
    version: Literal[1]
    url: str = Field(description="what a client uses: https with TLS; a wildcard bind names this host")
    api: str
    bind: str = Field(description="the listening socket's address:port (e.g. 0.0.0.0:8470)")
    tls: bool = Field(description="HTTPS (--ssl-certfile, --ssl-keyfile)")
    token_file: Path
    token_created: bool
    db: Path
    pid: int
    chip_id: str
    fabric: str
    bench: str
    reconciled: list[dict[str, object]] = Field(description="what the start-up reconciliation did")
    telemetry_period_s: Seconds
    on_dark: Literal["auto", "alert"]
    heater_map: Literal["fitted", "ideal"] = Field(
        description="the heater map in force: a calibration map (--map, or the one recorded in the "
                    "database), or the ideal heater law (routes then leak light)")


class YieldGroup(Strict):
    """One grid point of a yield campaign."""

    mesh: MeshSpec
    loss_spread_db: Db
    kappa_spread: float
    n_chips: Count
    yield_: float = Field(alias="yield", ge=0, le=1, description="fraction of chips that pass")


class CampaignOutput(Strict):
    """``lumion campaign --json``: a Dask campaign's summary (yield or availability keys)."""

    schema_name: Literal["lumion.campaign"] = Field(alias="schema")
    version: Literal[1]
    kind: Literal["yield", "availability", "capacity"]
    seed: Count
    scheduler: str
    workers: Count
    n_tasks: Count
    seconds: Seconds = Field(description="wall time (s); by the suffix convention: elapsed_s")
    out: Path | None
    plot: Path | None
    # kind = yield
    yield_: float | None = Field(None, alias="yield", ge=0, le=1)
    n_chips: Count | None = None
    margin_db: Db | None = None
    min_acr_db: Db | None = None
    accelerators: Count | None = None
    spares: Count | None = None
    groups: list[YieldGroup] | None = None
    # kind = availability
    n_traces: Count | None = None
    failures: Count | None = Field(None, description="accelerator failures drawn over the traces")
    mean: dict[str, dict[str, float | None]] | None = Field(None, description="policy -> metric -> mean "
                                                            "(the only grid point; null for a sweep)")
    fabric_over_baseline: dict[str, float | None] | None = None
    points: list[dict[str, Any]] | None = Field(None, description="availability: per (mtbf_h, recovery) "
                                                "each policy's mean and 95 % interval and the paired "
                                                "fabric-vs-baseline figures (docs/campaigns.md)")
    # kind = capacity
    capacity: list[dict[str, Any]] | None = Field(None, description="per (mesh, workload, baseline) the "
                                                  "policies' means, 95 % intervals and paired figures")


class UnitaryRow(Strict):
    """A unitary's figures at one wavelength (photonics.synthesis.report)."""

    wavelength_nm: float
    fidelity: float = Field(ge=0, description="|Tr(U^H V)|^2 / (N Tr(V^H V)): 1 when V is U up to loss and "
                            "a global phase")
    loss_db: Db = Field(description="-10 log10(Tr(V^H V) / N)")
    worst_crosstalk_db: Db = Field(description="most power any input sends to a port that is no output")


class PowerRow(Strict):
    """A power target's figures at one wavelength (photonics.synthesis.report)."""

    wavelength_nm: float
    shares: list[list[float]] = Field(description="output x input: each output's share of the power "
                                      "reaching the outputs")
    max_share_error: float = Field(ge=0)
    insertion_loss_db: list[float] = Field(description="per input, dB")
    worst_crosstalk_db: Db


class FilterRow(Strict):
    """A filter's figures over one free spectral range (photonics.synthesis.ring / .mzi)."""

    wavelength_nm: float = Field(description="the centre asked")
    centre_nm: float = Field(description="the notch's deepest point (ring) or the passband's peak "
                             "(Mach-Zehnder)")
    fwhm_nm: float = Field(description="full width at half depth")
    extinction_db: float = Field(description="highest over lowest level of the output")
    max_transmission_db: Db = Field(description="highest level: the ring's through level or the "
                                    "passband's peak")


class SynthesizeOutput(Strict):
    """``lumion synthesize --json``: the target, the state that realises it and its report."""

    schema_name: Literal["lumion.synthesize"] = Field(alias="schema")
    version: Literal[1]
    mesh: MeshSpec
    chip: str = Field(description="the chip model refined on: nominal, a fabricated seed or a calibration "
                      "map")
    kind: Literal["unitary", "splitter", "coupler", "filter", "mz_filter"]
    inputs: list[PortName]
    outputs: list[PortName]
    target: list[list[float]] | dict[str, list[list[float]]] | list[float] = Field(
        description="shares (output x input), a unitary as {'real': rows, 'imag': rows}, or a filter's "
        "[centre_nm, bandwidth_nm]")
    tbus: list[TbuName] = Field(description="the TBUs the target uses (the rest parked)")
    steps: Count = Field(description="L-BFGS iterations of the refinement")
    evaluations: Count
    start: list[UnitaryRow] | list[PowerRow] | list[FilterRow] = Field(
        description="the analytic start, per wavelength (a filter: one row)")
    achieved: list[UnitaryRow] | list[PowerRow] | list[FilterRow] = Field(
        description="the refined state, per wavelength (a filter: one row)")
    filter: dict[str, Any] | None = Field(None, description="a filter's layout: centre_nm, bandwidth_nm and "
                                          "fsr_nm asked and held; a ring's coupler and loop TBUs, a "
                                          "Mach-Zehnder's splitter, combiner, arms (TBUs) and "
                                          "arm_difference_tbus")
    state: StateFile
    configuration: ConfigurationFile | None = Field(description="what lumion program takes; null for a "
                                                    "unitary")
    not_programmable: str | None = Field(description="why no configuration can hold the target")
    out: Path | None
    out_schema: Literal["lumion.configuration", "lumion.state"] | None
    plot: Path | None


# command -> its output model; a command missing here fails tests/lab_scripts/test_schemas.py.
COMMAND_OUTPUTS = {
    "mesh": MeshOutput,
    "simulate": SimulateOutput,
    "route": RouteOutput,
    "layout": LayoutOutput,
    "demo": DemoOutput,
    "failover": FailoverOutput,
    "schedule": ScheduleOutput,
    "phases": PhasesOutput,
    "calibrate": CalibrateOutput,
    "bench": BenchOutput,
    "program": ProgramOutput,
    "collective": CollectiveOutput,
    "rack": RackOutput,
    "serve": ServeOutput,
    "campaign": CampaignOutput,
    "synthesize": SynthesizeOutput,
}

"""The trust campaign's program stage: calibrate -> route -> program through the CLI, a fault
injected into the chip after its calibration, what the CLI said against where the light went.

Per mesh and seed: ``lumion calibrate --bench sim`` writes the map of a healthy chip,
``lumion route --map`` plans :data:`PAIRS` random port pairs, then for each fault of
:data:`FAULTS` a fresh chip of the same seed gets the fault (on a TBU the routes use, drawn
from the seed) and ``lumion program --map --json`` programs the plan onto it over the
simulated instruments' wires (``instruments.config.open_bench`` handed that chip: the one
thing a user's run does not have). Then the chip's own optics say where each route's light
really goes (:func:`truth`), and the run is classified:

* **light wrong** (truth): a route's transmission more than ``ROUTE_TOL_DB`` below its plan,
  or its ACR against the other routes' receivers (every other port for a lone route) under
  ``program_verify.required_acr_db`` of its plan: light lands in another receiver;
* **silent wrong**: exit 0 while the light is wrong -- the worst;
* **conservative**: a non-zero exit while the light is right (a fault nothing used, named);
* **correct**: otherwise (exit 0 and right, or non-zero and wrong).

Seeds 9800-9899 (no test uses them). ``python benchmarks/bench_calibration_trust.py --stage
program`` runs it (docs/calibration.md "Program stage").
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lab_scripts.program_verify import VERIFY_NM, required_acr_db
from photonics.tolerances import ROUTE_TOL_DB

PAIRS = 3  # port pairs per plan: routes that can share TBUs and leak into each other's receivers
ROUTE_TRIES = 20  # random draws of pairs before a mesh and seed is given up (square meshes refuse many)
# A fault, applied after calibration: kind and amount. Phase shifts (rad) are what a trapped
# charge or stress does to a TBU; pi swaps bar and cross; "shared" shifts a TBU two routes use.
FAULTS = ("shift:pi", "shift:pi/2", "shift:1.0", "shift:0.5", "shift:0.2", "shared:0.5", "stuck:bar",
          "stuck:cross", "dead", "open-heater", "shorted-heater", "drift:2", "drift:5")
FLOOR_MW = 1e-15  # a dark port's power floor for dB (mW): -150 dBm, below any meter


@dataclass
class ProgramOutcome:
    """One programmed plan on one faulted chip (see the module docstring)."""

    mesh: str
    seed: int
    fault: str
    tbu: str | None
    exit_code: int
    status: str | None  # the --json verification status (None when the CLI printed an error)
    said: str  # the CLI's stderr, first line
    light_wrong: list[str] = field(default_factory=list)  # routes the truth finds wrong, and how
    verdict: str = ""  # silent_wrong | conservative | correct


def cli(*argv: str) -> tuple[int, str, str]:
    """``lumion ARGV`` in this process: (exit code, stdout, stderr)."""
    from lab_scripts.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def calibrated_map(spec: str, seed: int, folder: Path) -> Path:
    """``lumion calibrate --bench sim`` of the healthy chip (kept in ``folder``: reused)."""
    path = folder / f"map-{spec.replace(':', '_')}-{seed}.json"
    if not path.exists():
        code, _, err = cli("calibrate", "--bench", "sim", "--mesh", spec, "--seed", str(seed),
                           "--out", str(path), "--json", "--quiet")
        if code not in (0, 5):
            raise RuntimeError(f"calibrate {spec} {seed} exited {code}: {err.strip()}")
    return path


def planned(spec: str, seed: int, map_path: Path, folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """``lumion route --map`` of :data:`PAIRS` random pairs (redrawn while refused): (file, plan)."""
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(spec)
    rng = np.random.default_rng([seed, 42])
    for _ in range(ROUTE_TRIES):
        ports = rng.choice(mesh.n_ports, size=2 * PAIRS, replace=False)
        connects = [x for k in range(PAIRS) for x in ("--connect", f"{ports[2 * k]}:{ports[2 * k + 1]}")]
        code, out, _ = cli("route", "--mesh", spec, "--map", str(map_path), *connects, "--json")
        if code == 0:
            path = folder / f"plan-{spec.replace(':', '_')}-{seed}.json"
            path.write_text(out)
            return path, json.loads(out)
    return None


def bench_config(spec: str, seed: int, folder: Path) -> Path:
    """A bench config whose instruments are all simulated (the chip is handed in separately)."""
    path = folder / f"bench-{spec.replace(':', '_')}-{seed}.toml"
    path.write_text(f'schema = "lumion.bench"\nversion = 1\nmesh = "{spec}"\n'
                    '[heater_driver]\naddress = "sim"\n[laser]\naddress = "sim"\n'
                    f'[power_meter]\naddress = "sim"\n[sim]\nseed = {seed}\n')
    return path


def faulted_chip(spec: str, seed: int, fault: str, plan: dict[str, Any], cmap: Any,
                 rng: np.random.Generator) -> tuple[Any, str | None]:
    """A fresh chip of ``seed`` with ``fault`` applied (see :data:`FAULTS`), and the TBU it hit.

    Heater faults go on the arm of the TBU the map drives harder for this plan (a heater
    carrying no current changes nothing when it breaks).
    """
    from instruments.sim.chip import Chip
    from photonics.configuration import Configuration
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(spec)
    chip = Chip(mesh, seed)
    if fault == "none":
        return chip, None
    kind, _, amount = fault.partition(":")
    used = [[h["tbu"] for h in r["tbus"]] for r in plan["routes"]]
    if kind == "drift":
        chip.set_temperature_profile(lambda _t_s, k=float(amount): k)
        return chip, None
    if kind == "shared":
        counts: dict[str, int] = {}
        for names in used:
            for t in set(names):
                counts[t] = counts.get(t, 0) + 1
        pool = sorted(t for t, n in counts.items() if n > 1)
        if not pool:
            return None, None
    else:
        pool = sorted({t for names in used for t in names})
    tbu = pool[int(rng.integers(len(pool)))]
    break_tbu(chip, mesh.tbu_index(tbu), kind, amount,
              lambda: cmap.currents_for(Configuration.from_dict(plan["configuration"], mesh), 30.0))
    return chip, tbu


def break_tbu(chip: Any, t: int, kind: str, amount: str, currents: Callable[[], Any]) -> None:
    """Apply fault ``kind`` (shift/shared, stuck, dead or a heater fault) to TBU ``t`` of ``chip``.

    A heater fault goes on the arm the map drives harder (``currents()``: the map's currents for
    what is programmed, mA): a heater carrying no current changes nothing when it breaks.
    """
    name = chip.mesh.tbu_names[t]
    if kind in ("shift", "shared"):
        chip.shift_phase(name, radians(amount))
    elif kind == "stuck":
        chip.fail_tbu(name, amount)
    elif kind == "dead":
        chip.fail_tbu(name, "dead")
    else:
        drive = currents()
        chip.fail_heater(2 * t + int(drive[2 * t + 1] > drive[2 * t]), kind)


def radians(text: str) -> float:
    """A fault's phase (rad): a number, ``pi`` or ``pi/N``."""
    if text.startswith("pi"):
        return math.pi / float(text.partition("/")[2] or 1)
    return float(text)


def truth(chip: Any, plan: dict[str, Any]) -> list[str]:
    """The routes whose light is wrong on the chip as it is now, each with how (see the module docstring)."""
    mesh = chip.mesh
    dsts = [mesh.port_index(r["dst"]) for r in plan["routes"]]
    wrong = []
    for r in plan["routes"]:
        src, dst = mesh.port_index(r["src"]), mesh.port_index(r["dst"])
        p = np.maximum(chip.output_power_mw(src, VERIFY_NM), FLOOR_MW)
        victims = [q for q in dsts if q != dst] if len(dsts) > 1 else \
            [q for q in range(mesh.n_ports) if q not in (src, dst)]
        trans = 10 * math.log10(p[dst])
        acr = trans - 10 * math.log10(max(p[q] for q in victims))
        plan_trans, plan_acr = r["planned_at_check"]
        name = f"{r['src']}->{r['dst']}"
        if trans < plan_trans - ROUTE_TOL_DB:
            wrong.append(f"{name}: {trans:.1f} dB, planned {plan_trans:.1f}")
        elif acr < required_acr_db(plan_acr):
            wrong.append(f"{name}: ACR {acr:.1f} dB, planned {plan_acr:.1f}")
    return wrong


def with_checks_at_verify_nm(spec: str, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan with each route's (transmission, ACR) at the check's wavelength (dB, ideal TBUs):
    what a right map realises there, the truth's reference (the plan's own figures are worst
    over the lane's channels).
    """
    from photonics.configuration import Configuration
    from photonics.routing import check_routes
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(spec)
    conf = Configuration.from_dict(plan["configuration"], mesh)
    checks = check_routes(mesh, conf, list(conf.routes), None, wavelengths_nm=[VERIFY_NM])
    routes = [r | {"planned_at_check": (c.transmission_db, c.acr_db)} for r, c in zip(plan["routes"], checks,
                                                                                       strict=True)]
    return plan | {"routes": routes}


def program_on(chip: Any, bench: Path, map_path: Path, plan_path: Path) -> tuple[int, str | None, str]:
    """``lumion program --bench BENCH --map MAP --configuration PLAN --json`` on ``chip``:
    (exit code, verification status or None, first stderr line).
    """
    import instruments.config

    opener = instruments.config.open_bench
    instruments.config.open_bench = functools.partial(opener, chip=chip)
    try:
        code, out, err = cli("program", "--bench", str(bench), "--map", str(map_path), "--configuration",
                             str(plan_path), "--json")
    finally:
        instruments.config.open_bench = opener
    status = None
    with contextlib.suppress(ValueError):
        status = json.loads(out).get("verification", {}).get("status")
    return code, status, (err.strip().splitlines() or [""])[0]


def verdict(exit_code: int, light_wrong: list[str]) -> str:
    """silent_wrong, conservative or correct (see the module docstring)."""
    if exit_code == 0:
        return "silent_wrong" if light_wrong else "correct"
    return "correct" if light_wrong else "conservative"


def run_mesh_seed(spec: str, seed: int, folder: Path,
                  faults: tuple[str, ...] = FAULTS) -> list[ProgramOutcome]:
    """Every fault on one mesh and seed (a healthy run first, as "none")."""
    from calibration.map import CalibrationMap
    from photonics.topology import mesh_from_spec

    map_path = calibrated_map(spec, seed, folder)
    got = planned(spec, seed, map_path, folder)
    if got is None:
        return []
    plan_path, plan = got
    plan = with_checks_at_verify_nm(spec, plan)
    cmap = CalibrationMap.load(map_path, mesh=mesh_from_spec(spec))
    bench = bench_config(spec, seed, folder)
    rng = np.random.default_rng([seed, 7])
    outcomes = []
    for fault in ("none", *faults):
        chip, tbu = faulted_chip(spec, seed, fault, plan, cmap, rng)
        if chip is None:  # no TBU shared by two routes in this plan
            continue
        code, status, said = program_on(chip, bench, map_path, plan_path)
        wrong = truth(chip, plan)
        outcomes.append(ProgramOutcome(spec, seed, fault, tbu, code, status, said, wrong,
                                       verdict(code, wrong)))
    return outcomes


def summarise(outcomes: list[ProgramOutcome]) -> dict[str, dict[str, int]]:
    """Per fault: runs, silent_wrong, conservative, correct (and the dark stage's named, blamed_mesh)."""
    table: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = table.setdefault(o.fault, {"runs": 0, "silent_wrong": 0, "conservative": 0, "correct": 0})
        row["runs"] += 1
        row[o.verdict] = row.get(o.verdict, 0) + 1
    return table


# -- the failover stage: lumion failover --bench on the default SmartLight fabric ------------
FAILOVER_FAULTS = ("shift:1.0", "shift:0.5", "shift:pi", "stuck:cross", "dead")
FAILOVER_FAIL = "gpu2"  # the accelerator failed in every run (its spare's route is new light)


def failover_truth(chip: Any, links: list[dict[str, Any]]) -> list[str]:
    """The ring links whose light is wrong on ``chip`` now (as :func:`truth`, victims = the other
    links' receivers, references = each link's plan at the check's wavelength).
    """
    plan = {"routes": [{"src": lk["src"], "dst": lk["dst"], "planned_at_check": lk["planned_at_check"]}
                       for lk in links]}
    return truth(chip, plan)


def failover_links_at_check(mesh: Any, plan_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``lumion.plan``'s links, each with its (transmission, ACR) at the check's wavelength
    against the other links' receivers (ideal TBUs), as :func:`with_checks_at_verify_nm`.
    """
    from photonics.configuration import Configuration
    from photonics.routing import check_routes

    conf = Configuration.from_dict(plan_doc["configuration"], mesh)
    routes = list(conf.routes)
    checks = check_routes(mesh, conf, routes, None, wavelengths_nm=[VERIFY_NM])
    name = lambda p: mesh.port_names[mesh.port_index(p)]  # noqa: E731 - one-line lookup
    by_pair = {(name(r.src), name(r.dst)): (c.transmission_db, c.acr_db)
               for r, c in zip(routes, checks, strict=True)}
    return [lk | {"planned_at_check": by_pair[(lk["src"], lk["dst"])]} for lk in plan_doc["links"]]


def run_failover_seed(seed: int, folder: Path,
                      faults: tuple[str, ...] = FAILOVER_FAULTS) -> list[ProgramOutcome]:
    """``lumion failover --bench --map --fail gpu2`` on the default fabric's chip of ``seed``,
    a fault put (before the run, after calibration) on each placed link's first TBU in turn
    (the TBU its light enters the mesh by: every link's light crosses it).
    """
    import instruments.config
    from instruments.sim.chip import Chip
    from photonics.topology import smartlight

    mesh = smartlight()
    map_path = calibrated_map("smartlight", seed, folder)
    placed = folder / f"ring-{seed}.json"
    code, _, err = cli("failover", "--map", str(map_path), "--out", str(placed), "--json")
    if code:
        raise RuntimeError(f"placing the ring on seed {seed} exited {code}: {err.strip()}")
    ring = json.loads(placed.read_text())
    outcomes = []
    for fault in ("none", *faults):
        for k, link in enumerate(ring["links"]):
            if fault == "none" and k:
                break
            chip = Chip(mesh, seed)
            hops = link["route"]["tbus"]
            tbu = None if fault == "none" else hops[0]["tbu"]
            kind, _, amount = fault.partition(":")
            if kind == "shift":
                chip.shift_phase(tbu, radians(amount))
            elif kind in ("stuck", "dead"):
                chip.fail_tbu(tbu, amount or "dead")
            out_plan = folder / f"failover-{seed}.json"
            opener = instruments.config.open_bench
            instruments.config.open_bench = functools.partial(opener, chip=chip)
            try:
                code, out, err = cli("failover", "--bench", "sim", "--seed", str(seed), "--map",
                                     str(map_path), "--fail", FAILOVER_FAIL, "--out", str(out_plan), "--json")
            finally:
                instruments.config.open_bench = opener
            doc = json.loads(out_plan.read_text()) if code == 0 else ring
            wrong = failover_truth(chip, failover_links_at_check(mesh, doc))
            said = (err.strip().splitlines() or [""])[0]
            status = None
            with contextlib.suppress(ValueError):
                status = json.loads(out).get("placement_verification", {}).get("status")
            outcomes.append(ProgramOutcome("smartlight/failover", seed, fault, tbu, code, status, said, wrong,
                                           verdict(code, wrong)))
    return outcomes


# -- the dark stage: the source sends nothing during lumion program and lumion failover --bench ----
DARK_FAULTS = ("laser-off", "laser-dead", "tx-dead")
# tx-dead (failover only): gpu0's TX lane (port:1), whose link gpu0->gpu1 the bench's transceivers
# meter (qsfp0 transmits into ports 0-3 and receives at 4-7): a running link's source goes dark
DARK_TX = "port:1"
# A dead laser that still reports its output on: its light 100 dB down (under any meter's floor).
LASER_DEAD_DB = -100.0


def darkened(opener: Any, chip: Any, how: str) -> Any:
    """``open_bench`` handing ``chip`` in, with the simulated laser dark after opening: its output
    switched off (``laser-off``: it says so) or dead while it reports itself on (``laser-dead``),
    or the lasers of :data:`DARK_TX`'s transceiver dead (``tx-dead``: its monitor reads them dark).
    """
    def open_(*args: Any, **kwargs: Any) -> Any:
        bench = opener(*args, chip=chip, **kwargs)
        if how == "laser-off":
            bench.sim.laser.output_on = False
        elif how == "laser-dead":
            bench.sim.laser.drift(LASER_DEAD_DB)
        else:
            bench.sim.kill_transmitter(DARK_TX)
        return bench
    return open_


def dark_verdict(exit_code: int, said: str) -> str:
    """correct (refused, the dark source said), named (exit 0, the output says the source is dark:
    nothing passed as verified), blamed_mesh (refused blaming the chip or map), silent_wrong (exit 0,
    nothing said: a dark check passed).
    """
    dark = "source is dark" in said or "output off" in said
    if exit_code == 0:
        return "named" if dark else "silent_wrong"
    return "correct" if dark else "blamed_mesh"


def run_dark_seed(spec: str, seed: int, folder: Path,
                  faults: tuple[str, ...] = DARK_FAULTS) -> list[ProgramOutcome]:
    """Per dark fault: ``lumion program`` of the routed plan on ``spec`` and, on smartlight,
    ``lumion failover --bench --map --fail gpu2`` (a healthy chip: only the source is dark).
    """
    import instruments.config
    from instruments.sim.chip import Chip
    from photonics.topology import mesh_from_spec

    map_path = calibrated_map(spec, seed, folder)
    got = planned(spec, seed, map_path, folder)
    bench = bench_config(spec, seed, folder)
    opener = instruments.config.open_bench
    outcomes = []
    for fault in faults:
        runs: list[tuple[str, tuple[str, ...]]] = []
        if got is not None and fault != "tx-dead":
            runs.append((spec, ("program", "--bench", str(bench), "--map", str(map_path), "--configuration",
                                str(got[0]), "--json")))
        if spec == "smartlight":
            runs.append(("smartlight/failover", ("failover", "--bench", "sim", "--seed", str(seed), "--map",
                                                 str(map_path), "--fail", FAILOVER_FAIL, "--json")))
        for label, argv in runs:
            instruments.config.open_bench = darkened(opener, Chip(mesh_from_spec(spec), seed), fault)
            try:
                code, out, err = cli(*argv)
            finally:
                instruments.config.open_bench = opener
            said = (err.strip().splitlines() or [""])[0]
            status = None
            with contextlib.suppress(ValueError):
                doc = json.loads(out)
                status = (doc.get("verification") or {}).get("status")
                said = said or json.dumps(doc.get("verification", {}))[:2000]
            outcomes.append(ProgramOutcome(label, seed, fault, None, code, status, said, ["no light sent"],
                                           dark_verdict(code, said + out)))
    return outcomes


# -- the state stage: lumion synthesize --map --out, then lumion program of the heater state -------
STATE_FAULTS = FAULTS  # the program stage's faults, on a TBU the state uses
# What each mesh synthesises: a 3x3 unitary where the lattice allows one, else a ring notch filter.
STATE_TARGETS = {"square": ("--unitary", "random:3:{seed}"), "triangular": ("--unitary", "random:3:{seed}"),
                 "hex": ("--filter", "1550:0.02"), "smartlight": ("--filter", "1550:0.02")}


def phase_map(spec: str, seed: int, folder: Path) -> Path:
    """``lumion calibrate --bench sim --common-phase`` of the healthy chip (kept in ``folder``)."""
    path = folder / f"phase-map-{spec.replace(':', '_')}-{seed}.json"
    if not path.exists():
        code, _, err = cli("calibrate", "--bench", "sim", "--mesh", spec, "--seed", str(seed),
                           "--common-phase", "--out", str(path), "--json", "--quiet")
        if code not in (0, 5):
            raise RuntimeError(f"calibrate --common-phase {spec} {seed} exited {code}: {err.strip()}")
    return path


def synthesized(spec: str, seed: int, map_path: Path, folder: Path) -> Path | None:
    """``lumion synthesize --mesh SPEC --map MAP --out STATE`` (None when it refuses)."""
    kind, target = STATE_TARGETS[spec.partition(":")[0]]
    path = folder / f"state-{spec.replace(':', '_')}-{seed}.json"
    code, _, _ = cli("synthesize", "--mesh", spec, "--map", str(map_path), kind, target.format(seed=seed),
                     "--out", str(path), "--json")
    return path if code == 0 and path.exists() else None


def state_truth(chip: Any, program: Any) -> list[str]:
    """The inputs whose light is wrong on ``chip`` now: some port more than STATE_TOL of the
    input's power from the synthesis's prediction (the chip's own optics, no meter)."""
    from instruments.state_check import STATE_TOL

    p = program.prediction
    wrong = []
    for i, wl in enumerate(p.wavelengths_nm):
        for k, q in enumerate(p.inputs):
            got = chip.output_power_mw(q, wl)
            off = np.abs(got - p.powers[i, :, k])
            off[q] = 0.0
            if float(off.max()) > STATE_TOL:
                port = int(off.argmax())
                wrong.append(f"into {chip.mesh.port_names[q]} at {wl:g} nm: {chip.mesh.port_names[port]} "
                             f"{float(got[port]):.3f}, predicted {float(p.powers[i, port, k]):.3f}")
    return wrong


def state_faulted_chip(spec: str, seed: int, fault: str, program: Any, cmap: Any,
                       rng: np.random.Generator) -> tuple[Any, str | None]:
    """A fresh chip of ``seed`` with ``fault`` on a TBU the state uses (heater faults on the arm
    the map drives harder for the state); ``shared`` is a plain shift here (a state has no routes)."""
    from calibration.phase_drive import currents_for_state
    from instruments.sim.chip import Chip
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(spec)
    chip = Chip(mesh, seed)
    if fault == "none":
        return chip, None
    kind, _, amount = fault.partition(":")
    if kind == "drift":
        chip.set_temperature_profile(lambda _t_s, k=float(amount): k)
        return chip, None
    pool = sorted(program.used_tbus(mesh.n_tbus))
    t = pool[int(rng.integers(len(pool)))]
    break_tbu(chip, t, kind, amount, lambda: currents_for_state(cmap, program.state, 30.0))
    return chip, mesh.tbu_names[t]


def state_verdict(exit_code: int, status: str | None, named: list[str], tbu: str | None,
                  wrong: list[str]) -> str:
    """silent_wrong (exit 0 while light is wrong, the faulted TBU not named not verifiable),
    named (exit 0, status unverified, the faulted TBU among the arms named), conservative,
    correct."""
    if exit_code == 0 and wrong:
        return "named" if status == "unverified" and tbu is not None and tbu in named else "silent_wrong"
    return verdict(exit_code, wrong)


def run_state_seed(spec: str, seed: int, folder: Path,
                   faults: tuple[str, ...] = STATE_FAULTS) -> list[ProgramOutcome]:
    """Every fault on one mesh and seed's synthesised state (a healthy run first, as "none")."""
    import instruments.config
    from calibration.map import CalibrationMap
    from photonics.state_program import load_state
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(spec)
    map_path = phase_map(spec, seed, folder)
    state_path = synthesized(spec, seed, map_path, folder)
    if state_path is None:
        return []
    program = load_state(json.loads(state_path.read_text()), mesh, str(state_path))
    cmap = CalibrationMap.load(map_path, mesh=mesh)
    bench = bench_config(spec, seed, folder)
    rng = np.random.default_rng([seed, 11])
    opener = instruments.config.open_bench
    outcomes = []
    for fault in ("none", *faults):
        chip, tbu = state_faulted_chip(spec, seed, fault, program, cmap, rng)
        instruments.config.open_bench = functools.partial(opener, chip=chip)
        try:
            code, out, err = cli("program", "--bench", str(bench), "--map", str(map_path), "--configuration",
                                 str(state_path), "--json")
        finally:
            instruments.config.open_bench = opener
        status, named = None, []
        with contextlib.suppress(ValueError):
            v = json.loads(out).get("verification", {})
            status, named = v.get("status"), sorted({b["tbu"] for b in v.get("not_verifiable", [])})
        wrong = state_truth(chip, program)
        said = (err.strip().splitlines() or [f"not verifiable: {', '.join(named)}" if named else ""])[0]
        outcomes.append(ProgramOutcome(f"{spec}/state", seed, fault, tbu, code, status, said, wrong,
                                       state_verdict(code, status, named, tbu, wrong)))
    return outcomes


# -- the multicast stage: lumion collective --multicast --out, then lumion failover --plan --bench ----
MULTICAST_FAULTS = ("shift:pi", "shift:pi/2", "shift:1.0", "shift:0.5", "shift:0.2", "stuck:bar",
                    "stuck:cross", "dead", "open-heater", "shorted-heater", "drift:2", "drift:5")
# gpu0 -> {gpu1, gpu2} on the default fabric; gpu2 fails: pruned, or its branch spliced to spare1
MULTICAST_COLLECTIVE = ("--pattern", "broadcast-flat", "--accelerators", "3", "--multicast")
MULTICAST_ACTIONS = (("prune", ()), ("splice", ("--spare", "spare1")))


def tree_ports(doc: dict[str, Any], mesh: Any) -> list[tuple[int, list[int]]]:
    """(source port, receiver ports) of every tree of a ``lumion.multicast-plan``."""
    return [(mesh.port_index(g["tree"]["src"]), [mesh.port_index(d) for d in g["tree"]["dsts"]])
            for g in doc["groups"]]


def multicast_truth(chip: Any, doc: dict[str, Any], planned: dict[str, tuple[float, float]],
                    fabric: Any) -> list[str]:
    """Branches whose light is wrong on ``chip`` now (the chip's own optics at VERIFY_NM): more
    than ROUTE_TOL_DB under the branch's planned transmission, or the tree's source putting light
    into another accelerator's receiver within ``required_acr_db`` of the branch's own.
    """
    mesh = chip.mesh
    # a pruned or failed receiver's port is no victim (its share still arrives there, unread)
    gone = set(doc.get("failed_accelerators", []))
    dark = {mesh.port_index(q) for q in doc.get("dark_ports", [])}
    receivers = {p for a in fabric.accelerators if a.name not in gone for p in a.rx} - dark
    wrong = []
    for src, dsts in tree_ports(doc, mesh):
        p = np.maximum(chip.output_power_mw(src, VERIFY_NM), FLOOR_MW)
        others = [q for q in receivers if q not in dsts and q != src]
        leak = 10 * math.log10(max(p[q] for q in others)) if others else -math.inf
        for d in dsts:
            name = f"{fabric.owner(src)}->{fabric.owner(d)}"
            trans = 10 * math.log10(p[d])
            plan_trans, plan_acr = planned.get(name, (math.nan, math.inf))
            if trans < plan_trans - ROUTE_TOL_DB:
                wrong.append(f"{name}: {trans:.1f} dB, planned {plan_trans:.1f}")
            elif trans - leak < required_acr_db(plan_acr):
                wrong.append(f"{name}: ACR {trans - leak:.1f} dB into another receiver (plan {plan_acr:.1f})")
    return wrong


def run_multicast_seed(seed: int, folder: Path,
                       faults: tuple[str, ...] = MULTICAST_FAULTS) -> list[ProgramOutcome]:
    """Per fault (on a TBU a tree uses, drawn from the seed) and action (prune, splice):
    ``lumion failover --plan MC --fail gpu2 [--spare spare1] --bench sim --map``; a healthy run first.
    """
    import instruments.config
    from calibration.map import CalibrationMap
    from instruments.sim.chip import Chip
    from photonics.configuration import Configuration
    from photonics.fabric import default_fabric

    fabric = default_fabric()
    mesh = fabric.mesh
    map_path = calibrated_map("smartlight", seed, folder)
    cmap = CalibrationMap.load(map_path, mesh=mesh)
    mc = folder / f"mc-{seed}.json"
    code, _, err = cli("collective", *MULTICAST_COLLECTIVE, "--out", str(mc))
    if code:
        raise RuntimeError(f"collective --multicast exited {code}: {err.strip()}")
    doc = json.loads(mc.read_text())
    placed = Configuration.from_dict(doc["configuration"], mesh)  # the trees as first written
    pool = sorted({h["tbu"] for g in doc["groups"] for b in g["tree"]["branches"] for h in b["tbus"]})
    rng = np.random.default_rng([seed, 13])
    opener = instruments.config.open_bench
    outcomes = []
    for fault in ("none", *faults):
        tbu = None if fault == "none" or fault.startswith("drift") else pool[int(rng.integers(len(pool)))]
        for action, extra in MULTICAST_ACTIONS:
            chip = Chip(mesh, seed)
            kind, _, amount = fault.partition(":")
            if kind == "drift":
                chip.set_temperature_profile(lambda _t_s, k=float(amount): k)
            elif tbu is not None:  # heater faults on the arm the map drives harder for the trees as placed
                break_tbu(chip, mesh.tbu_index(tbu), kind, amount, lambda: cmap.currents_for(placed, 30.0))
            out_plan = folder / f"mc-out-{seed}.json"
            out_plan.unlink(missing_ok=True)
            instruments.config.open_bench = functools.partial(opener, chip=chip)
            try:
                argv = ("--plan", str(mc), "--fail", "gpu2", *extra, "--bench", "sim", "--seed", str(seed),
                        "--map", str(map_path), "--out", str(out_plan), "--json")
                code, out, err = cli("failover", *argv)
            finally:
                instruments.config.open_bench = opener
            status, planned = None, {}
            with contextlib.suppress(ValueError):
                rep = json.loads(out)
                status = (rep.get("verification") or {}).get("status")
                planned = {b["link"]: (b["after_db"], b["acr_db"]) for b in rep.get("branches", [])}
            now = json.loads(out_plan.read_text()) if code == 0 and out_plan.exists() else doc
            if not planned:  # refused: the trees before, as placed, against their own plan
                planned = placed_branches(fabric, now)
            wrong = multicast_truth(chip, now, planned, fabric)
            said = (err.strip().splitlines() or [""])[0]
            label, judged = f"smartlight/multicast-{action}", verdict(code, wrong)
            outcomes.append(ProgramOutcome(label, seed, fault, tbu, code, status, said, wrong, judged))
    return outcomes


def placed_branches(fabric: Any, doc: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each branch of a multicast plan file: (planned transmission dB, planned ACR dB: inf, so the
    truth holds it to MIN_ACR_DB), solved again from its configuration."""
    from photonics.fabric.multicast_io import multicast_from_dict

    plan = multicast_from_dict(doc, fabric).plan
    return {f"{b.src}->{b.dst}": (b.transmission_db, math.inf) for group in plan.branches for b in group}

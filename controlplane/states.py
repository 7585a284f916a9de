"""Heater states through the service (``POST /api/v1/states``): what ``lumion program`` does with
a ``lumion synthesize --out`` state, on a chip that also runs jobs.

A heater state (a unitary, a filter) fixes both arms' phases of the TBUs its ``prediction``
names (:class:`photonics.state_program.StateToProgram`; a state without one uses every TBU).
The service refuses exactly what ``lumion program`` refuses, before anything is written: a
document that is not a state, a state made for another mesh, an ideal or power-only heater
map, a TBU the map records as failed (or the service knows failed or suspect); and, because
the chip is shared, a TBU a running job's links cross or another applied state holds, named
with the job or state holding it. Only the state's own TBUs' heaters are written
(:func:`calibration.phase_drive.currents_for_state_among`: every other heater held at what
the chip holds, its heat on the state's heaters compensated), so no running link's heater
moves. The check by light is :func:`instruments.state_check.state_verification`, the one
``lumion program`` runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.heater_map import IdealMap, UnreachableError
from calibration.settable import why_not_settable
from controlplane.errors import ServiceError
from photonics.configuration import MeshMismatchError
from photonics.errors import LumionError
from photonics.state import SCHEMA as STATE_SCHEMA
from photonics.state_program import StateToProgram, load_state
from photonics.synthesis.prediction import KEY

RUN_COMMON_PHASE = ("calibrate the chip's common phases (lumion calibrate --common-phase) and restart "
                    "the service with that map (lumion serve --map MAP.json)")


@dataclass(frozen=True, eq=False)
class HeldState:
    """A heater state applied on the chip: its id, program, the TBUs it holds, its check by light."""

    id: str
    program: StateToProgram
    tbus: tuple[int, ...]
    verification: dict[str, Any] | None
    created: str

    def view(self, mesh: Any) -> dict[str, Any]:
        """The state as ``GET /api/v1/states/{id}`` shows it."""
        v = self.verification or {}
        p = self.program.prediction
        return {"id": self.id, "state": "applied", "kind": p.kind if p is not None else None,
                "tbus": [mesh.tbu_names[t] for t in self.tbus],
                "inputs": [mesh.port_names[q] for q in p.inputs] if p is not None else [],
                "outputs": [mesh.port_names[q] for q in p.outputs] if p is not None else [],
                "status": v.get("status"), "verification": self.verification, "created": self.created}


def read_state(document: Any, mesh: Any, source: str = "the request body") -> StateToProgram:
    """The heater state in ``document`` for ``mesh``; 422 for anything else (another mesh included)."""
    if not isinstance(document, dict) or document.get("schema") != STATE_SCHEMA:
        raise ServiceError(f"{source} is not a heater state: it needs \"schema\": \"{STATE_SCHEMA}\" "
                           "(what lumion synthesize --out writes for a unitary or a filter)")
    try:
        return load_state(document, mesh, source)
    except MeshMismatchError as exc:
        raise ServiceError(f"{exc}: nothing was written") from exc
    except (LumionError, KeyError, TypeError, ValueError) as exc:
        raise ServiceError(f"{source}: {exc}"[:400]) from exc


def held_from_record(record: Mapping[str, Any], mesh: Any) -> HeldState:
    """A :class:`HeldState` from the store's row (``Store.heater_states``)."""
    program = load_state(record["body"], mesh, f"heater state {record['id']}")
    return HeldState(str(record["id"]), program, tuple(mesh.tbu_index(n) for n in record["tbus"]),
                     record["verification"], str(record["created"]))


def require_phase_map(heater_map: Any) -> None:
    """409 unless the service's heater map holds common phases (as ``lumion program`` refuses)."""
    if heater_map is None or isinstance(heater_map, IdealMap):
        raise ServiceError("the service runs the ideal heater map: a heater state's phases need a "
                           f"phase-calibrated map; nothing was written; {RUN_COMMON_PHASE}", "impossible")
    if not getattr(heater_map, "phase_calibrated", False):
        raise ServiceError("the service's heater map is power-only (no common phases): a heater state set "
                           "through it would be another matrix, which light could not trace to a phase; "
                           f"nothing was written; {RUN_COMMON_PHASE}", "impossible")


def refuse_failed(program: StateToProgram, heater_map: Any, mesh: Any, failed: Mapping[int, str],
                  suspects: tuple[str, ...]) -> None:
    """409 naming the first TBU the state uses that the map records failed, the service recorded
    failed (a failure report), or light made a suspect.
    """
    hint = ("synthesize it again with the service's map (lumion synthesize --map), which avoids it"
            if program.prediction is not None else
            f"this state names no TBUs it uses (no '{KEY}'), so it needs every TBU: synthesize it with "
            "the service's map (lumion synthesize --map), which avoids failed ones")
    for t in program.used_tbus(mesh.n_tbus):
        name = mesh.tbu_names[t]
        why = why_not_settable(heater_map, t, "split", False) if getattr(heater_map, "failed", None) else None
        if why is None and t in failed:
            why = f"failed ({failed[t]}, reported to the service)"
        if why is None and name in suspects:
            why = ("a suspect (light blamed it during a repair; POST /api/v1/tbus/"
                   f"{name}/clear once it is checked)")
        if why:
            raise ServiceError(f"the heater state uses {name}, which is {why}: nothing was written; {hint}",
                               "impossible")


def refuse_held(program: StateToProgram, mesh: Any, holders: Mapping[int, str]) -> None:
    """409 naming the TBUs of the state a running job's links or another applied state hold
    (``holders``: TBU index -> "job job-1" / "heater state state-2"), and their holder.
    """
    clash: dict[str, list[str]] = {}
    for t in program.used_tbus(mesh.n_tbus):
        if t in holders:
            clash.setdefault(holders[t], []).append(mesh.tbu_names[t])
    if clash:
        said = "; ".join(f"{holder} holds {', '.join(names)}" for holder, names in clash.items())
        raise ServiceError(f"the heater state uses TBUs already in use ({said}): nothing was written, the "
                           "running work is untouched; stop it first (DELETE it) or synthesize the state "
                           "on other TBUs", "impossible")


def holders_of(links_by_job: Mapping[str, list[Any]], states: Mapping[str, HeldState],
               trees_by_job: Mapping[str, set[int]] | None = None) -> dict[int, str]:
    """TBU index -> what holds it: ``job <id>`` for a running link's or a multicast tree's TBU,
    ``heater state <id>``.
    """
    out: dict[int, str] = {}
    for sid, hs in states.items():
        out.update(dict.fromkeys(hs.tbus, f"heater state {sid}"))
    for jid, tbus in (trees_by_job or {}).items():
        out.update(dict.fromkeys(tbus, f"job {jid}"))
    for jid, links in links_by_job.items():
        out.update({int(t): f"job {jid}" for lk in links for t in lk.route.tbus})
    return out


def state_program(program: StateToProgram, heater_map: Any, held_ma: np.ndarray, max_current_ma: float,
                  decimals: int) -> dict[int, float]:
    """{channel: mA} of the state's TBUs' heaters that change (every other heater held at
    ``held_ma``, its crosstalk compensated); 409 naming a heater past the current limit.
    """
    from calibration.phase_drive import currents_for_state_among

    tbus = program.used_tbus(len(held_ma) // 2)
    try:
        target = currents_for_state_among(heater_map, program.state, tbus, held_ma, max_current_ma)
    except UnreachableError as exc:
        raise ServiceError(f"{exc}: nothing was written", "impossible") from exc
    channels = [c for t in tbus for c in (2 * t, 2 * t + 1)]
    return {c: float(target[c]) for c in channels
            if round(float(target[c]), decimals) != round(float(held_ma[c]), decimals)}


def mismatch_message(v: Mapping[str, Any]) -> str:
    """The one line of a state light disagrees with: each input off, its worst port and error (a
    dark source said instead: nothing was compared).
    """
    if v.get("dark"):
        return (f"{v['dark']}; the service wrote the previous currents back and read them (the state is not "
                "applied, nothing else moved)")
    said = []
    for r in v["inputs"]:
        if r["status"] != "off":
            continue
        w, others = r["worst"], [p for p in r["off_ports"] if p != r["worst"]["port"]]
        said.append(f"into {r['port']} at {r['wavelength_nm']:g} nm, {w['port']} measured "
                    f"{w['measured']:.3f} of the input, predicted {w['predicted']:.3f}"
                    + (f", also off: {', '.join(others)}" if others else ""))
    return (f"light disagrees with the heater state's prediction by more than {v['tolerance']:g} of the "
            f"input's power: {'; '.join(said)}; the service wrote the previous currents back and read them "
            "(the state is not applied, nothing else moved)")


def state_check(bench: Any, program: StateToProgram, heater_map: Any) -> dict[str, Any]:
    """The state's check by light (``lumion program --json``'s ``verification``: status ok, off
    or unverified; inputs; the arms light cannot see).
    """
    from instruments.state_check import state_verification

    return state_verification(bench, program, heater_map, skip=False)


def refusal(v: Mapping[str, Any], links: Mapping[str, Any]) -> str | None:
    """Why a state just written must be taken back (None: keep it): light off its prediction, or
    a running link it broke (:func:`links_refusal`).
    """
    if v["status"] == "off":
        return mismatch_message(v)
    return links_refusal(links, "setting the heater state")


def links_refusal(links: Mapping[str, Any], what: str) -> str | None:
    """Why a write must be taken back because of the running links (None: they hold): ``links``
    is :func:`photonics.fabric.verify.summary` of every running link read before and after it;
    a link off its plan that was not before, or moved by more than the held tolerance.
    """
    broken = [r for r in links["links"]
              if r["status"] == "hit" or (r["status"] == "off" and not r["off_before"])]
    if not broken:
        return None
    said = ", ".join(f"{r['link']} ({r['difference_db']:+.2f} dB from plan"
                     + (f", {r['change_db']:+.2f} dB from before" if r["change_db"] is not None else "")
                     + ")" for r in broken)
    return (f"{what} moved running links (held tolerance {links['held_tolerance_db']:g} dB, plan "
            f"tolerance {links['tolerance_db']:g} dB): {said}; the service wrote the previous currents back "
            "and read them (nothing is applied, the jobs hold their light)")

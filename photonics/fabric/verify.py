"""The fabric's verify stage: judge a recovery by light, and repair around what light blames.

A recovery is computed from the heater map; only light says whether the chip does it. After
the changed heaters are written and settled, every link of the new plan is measured with
whatever meter the bench has (the receiving transceivers' RX power, or the bench laser and
power meter: :mod:`instruments.light_meter`) and judged here:

* a link is **off** when its measured power differs from its planned power by more than
  :data:`~photonics.tolerances.ROUTE_TOL_DB`;
* a held link (route and heaters bit-identical) is **hit** when its power moved by more than
  :data:`~photonics.tolerances.HELD_TOL_DB` from what it read before the recovery;
* a link no meter reaches is **not measured**, and the answer says so (never "ok").

:func:`verified_recovery` runs the bounded repair loop over injected effects (compute,
apply, measure, restore), so the control plane and ``lumion failover --bench`` share it: a
re-routed link that is off makes the TBUs only it crosses **suspects**; they are restored
away from, treated as failed, and the recovery is computed, applied and measured again, at
most :data:`MAX_ATTEMPTS` times. What cannot be repaired is refused
(:class:`VerificationError`, the chip back in its previous state), naming the link and its
measured vs planned power. Pure: no I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from photonics.fabric.model import FabricError
from photonics.tolerances import HELD_TOL_DB, MIN_ACR_DB, ROUTE_TOL_DB

# Recoveries tried per failure: the first plan and two repairs. Each repair avoids every TBU
# light blamed so far; one hidden fault is found in one repair, and a chip that still fails
# after two is wrong in more places than re-routing should guess at (calibrate it again).
MAX_ATTEMPTS = 3

# Suspects named in a refusal's one line (all of them are in the attempt's suspect_tbus): a
# dark route blames every TBU no lit link clears, often a dozen, which would bury the link.
SHOWN_SUSPECTS = 4

OK, OFF, NOT_MEASURED, HIT = "ok", "off", "not measured", "hit"


@dataclass(frozen=True)
class LinkLight:
    """One link of a plan as planned and as measured (dBm at the meter that read it).

    ``meter``: "transceivers" (the receiving module's RX power against the transmitting
    lane's launch less the off-mesh losses and the route's planned transmission), "power
    meter" (the bench laser switched into the route's source, the meter head at its
    destination), or None when no meter reaches the link (``reason`` says why).
    ``before_dbm``: a held link's reading before the recovery (None for a re-routed link).
    """

    index: int
    link: str
    rerouted: bool
    meter: str | None
    planned_dbm: float | None
    measured_dbm: float | None
    before_dbm: float | None = None
    reason: str = ""
    # A new link's receiver read with its own transmitter dark (instruments.light_meter): the
    # light every other transmitter puts into it (dBm); None when not read (held links).
    others_dbm: float | None = None
    # Not measured because the meter's own source sent nothing (the bench laser reports its
    # output off, or no head read light from any source lit: instruments.dark_source; ``reason``
    # says which): the light was NOT seen, unlike a link no meter reaches, which is honest to
    # leave "not measured". :func:`summary` then says off, as `lumion program` does.
    unlit: bool = False

    @property
    def difference_db(self) -> float | None:
        """Measured minus planned (dB); None when not measured."""
        if self.measured_dbm is None or self.planned_dbm is None:
            return None
        return self.measured_dbm - self.planned_dbm

    @property
    def change_db(self) -> float | None:
        """A held link's change across the recovery (dB); None for a re-routed or unmeasured link."""
        if self.rerouted or self.before_dbm is None or self.measured_dbm is None:
            return None
        return self.measured_dbm - self.before_dbm

    @property
    def source_dark(self) -> bool:
        """Measured, and the meter said why its reading is not the mesh's (``reason``: its
        transmitter's own monitor reads it dark, instruments.light_meter): no TBU is blamed for it.
        """
        return self.measured_dbm is not None and bool(self.reason)

    @property
    def acr_db(self) -> float | None:
        """Its own light over the other transmitters' light at its receiver (dB); None unless
        both were read (a new link's dark read).
        """
        if self.measured_dbm is None or self.others_dbm is None:
            return None
        return self.measured_dbm - self.others_dbm

    @property
    def status(self) -> str:
        """ok, off (beyond ROUTE_TOL_DB of plan, or a new link whose receiver gets other
        transmitters' light within MIN_ACR_DB of its own), hit (held, moved beyond
        HELD_TOL_DB), not measured.
        """
        diff = self.difference_db
        if diff is None:
            return NOT_MEASURED
        if not abs(diff) <= ROUTE_TOL_DB:  # NaN is off too
            return OFF
        acr = self.acr_db
        if acr is not None and not acr >= MIN_ACR_DB:
            return OFF
        change = self.change_db
        return HIT if change is not None and not abs(change) <= HELD_TOL_DB else OK

    @property
    def off_before(self) -> bool:
        """A held link that was already off its plan before the recovery (not this recovery's doing)."""
        if self.rerouted or self.before_dbm is None or self.planned_dbm is None:
            return False
        return not abs(self.before_dbm - self.planned_dbm) <= ROUTE_TOL_DB

    def to_dict(self) -> dict[str, Any]:
        """JSON form (dB to 1 mdB)."""
        return {"link": self.link, "rerouted": self.rerouted, "meter": self.meter,
                "planned_dbm": _r(self.planned_dbm), "measured_dbm": _r(self.measured_dbm),
                "difference_db": _r(self.difference_db), "before_dbm": _r(self.before_dbm),
                "change_db": _r(self.change_db), "others_dbm": _r(self.others_dbm),
                "acr_db": _r(self.acr_db), "status": self.status,
                "off_before": self.off_before, "reason": self.reason}

    def describe(self) -> str:
        """``a->b measured X dBm, planned Y dBm (+Z dB, by the transceivers)``."""
        if self.measured_dbm is None:
            return f"{self.link} not measured ({self.reason})"
        text = (f"{self.link} measured {self.measured_dbm:.2f} dBm, planned {self.planned_dbm:.2f} dBm "
                f"({self.difference_db:+.2f} dB, by the {self.meter})")
        acr = self.acr_db
        if acr is not None and not acr >= MIN_ACR_DB:
            text += (f", and other transmitters' light reaches its receiver at {self.others_dbm:.2f} dBm "
                     f"(ACR {acr:.1f} dB, under {MIN_ACR_DB:g} dB)")
        return text + (f"; {self.reason}" if self.source_dark else "")


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 3)


def blocking(checks: Sequence[LinkLight]) -> list[LinkLight]:
    """Links whose light refuses the recovery: a re-routed link off its plan, or a held link
    that is off now but was not before (this recovery broke it). A held link hit (moved
    beyond HELD_TOL_DB, still within its plan) does not refuse it: rolling back would leave
    the failed accelerator's links dark; :func:`summary` says off for it instead.
    """
    return [c for c in checks if c.status == OFF and (c.rerouted or not c.off_before)]


def suspects(checks: Sequence[LinkLight], routes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """TBUs light blames: crossed by a blocking re-routed link whose source is not dark, by no
    link measured ok and by no held link.

    ``routes[i]`` is link ``i``'s TBUs. A TBU that carries a link measured within tolerance
    realises its state (one coupling per TBU per configuration), so it is cleared; a held
    link's TBUs kept their state across the recovery (a repair cannot move them: a held link
    off before the recovery is reported, not repaired).
    """
    cleared = {t for c in checks if c.status in (OK, HIT) or not c.rerouted for t in routes[c.index]}
    blamed = [t for c in blocking(checks) if c.rerouted and not c.source_dark
              for t in routes[c.index] if t not in cleared]
    return tuple(dict.fromkeys(blamed))


def to_avoid(blamed: Sequence[int], checks: Sequence[LinkLight], routes: Sequence[Sequence[int]],
             avoided: Mapping[int, str]) -> tuple[int, ...]:
    """The suspects the next attempt routes around: those inside the rejected routes first.

    A TBU at a rejected link's end port carries every route of that port: avoiding it cuts
    the transmitter off (or forces another spare). It is avoided only when light blames no
    interior TBU that is not avoided already (the interior suspects were routed around and
    the link is still dark: the end is left).
    """
    ends = {t for c in blocking(checks) if c.rerouted for t in (routes[c.index][0], routes[c.index][-1])}
    interior = tuple(t for t in blamed if t not in ends and t not in avoided)
    return interior or tuple(t for t in blamed if t not in avoided)


def summary(checks: Sequence[LinkLight]) -> dict[str, Any]:
    """The ``verification`` object of a recovery's answer (status: ok, off, not measured,
    partly measured; see docs/fabric.md "Verified by light"). A held link hit (moved beyond
    HELD_TOL_DB) makes it off, as a multicast tree's held branch: the recovery promised it
    bit-identical, so light did not confirm what was promised (``hitless_by_light`` false,
    ``held_change_db`` by how much). So does a dark source (a link ``unlit``: ``dark`` says
    why): the meter was there and saw nothing, so the plan's light was not seen -- off, as
    ``lumion program`` says it, never "not measured" as for a link no meter reaches.
    """
    measured = [c for c in checks if c.status != NOT_MEASURED]
    unmeasured = [c.link for c in checks if c.status == NOT_MEASURED]
    off = [c.link for c in checks if c.status == OFF]
    held = [c for c in measured if c.change_db is not None]
    # hitless is judged on the held links whose two readings mean something: lit, and on their plan
    # before (a link already dark or off before moves between two floors: said as off, not as a move).
    # By the change itself, not the status: a held link both off its plan and moved is "off" by status,
    # and counting only "hit" had said hitless_by_light true beside a 3 dB held_change_db (session 41).
    judged = [c for c in held if not c.unlit and not c.source_dark and not c.off_before]
    dark = next((c.reason for c in checks if c.unlit), None)
    if off or dark or any(c.status == HIT for c in held):
        status = OFF
    elif not measured:
        status = NOT_MEASURED
    elif unmeasured:
        status = "partly measured"
    else:
        status = OK
    return {"status": status, "tolerance_db": ROUTE_TOL_DB, "held_tolerance_db": HELD_TOL_DB,
            "meters": sorted({c.meter for c in measured if c.meter}), "links_off": off,
            "not_measured": unmeasured,
            "hitless_by_light": None if not judged else all(abs(c.change_db) <= HELD_TOL_DB  # type: ignore[arg-type]
                                                             for c in judged),
            "held_change_db": _r(max((abs(c.change_db) for c in judged), default=None)),  # type: ignore[arg-type]
            "dark": dark, "links": [c.to_dict() for c in checks]}


def not_measured(links: Sequence[str], rerouted: Sequence[int], reason: str) -> dict[str, Any]:
    """The ``verification`` object when no meter exists at all (``reason`` says so)."""
    checks = [LinkLight(i, name, i in rerouted, None, None, None, reason=reason)
              for i, name in enumerate(links)]
    return summary(checks)


class VerificationError(FabricError):
    """Light refused a recovery (every attempt); the chip holds what it held before.

    ``attempts``: each attempt's ``verification`` summary plus the suspects it found.
    """

    def __init__(self, message: str, attempts: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(message)
        self.attempts = list(attempts)


@dataclass
class Effects:
    """What :func:`verified_recovery` does to the world (the caller's bench and records).

    ``compute(avoid)``: the recovery avoiding ``avoid`` ({TBU: "dead"}, light's suspects so
    far); ``apply(rec)``: program it; ``measure(rec, before)``: judge every link of
    ``rec.plan`` (``before``: each link index's reading before the recovery); ``restore(rec,
    why)``: put the chip back as it was before ``rec`` was applied.
    """

    compute: Callable[[Mapping[int, str]], Any]
    apply: Callable[[Any], None]
    measure: Callable[[Any, Mapping[int, float]], list[LinkLight]]
    restore: Callable[[Any, str], None]
    before: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Verified:
    """A recovery light accepted (or could not judge: ``verification["status"]`` says)."""

    recovery: Any
    verification: dict[str, Any]
    attempts: tuple[dict[str, Any], ...]
    suspect_tbus: dict[int, str]


def verified_recovery(effects: Effects, tbu_names: Sequence[str],
                      max_attempts: int = MAX_ATTEMPTS, repair: bool = True) -> Verified:
    """Compute, apply and measure a recovery; repair around suspects; refuse what light rejects.

    ``repair`` False (a chip programmed through no fitted map, where light is expected to
    disagree with the plan): the first recovery is kept whatever light says, and the answer
    says what it said (``status`` off, never ok).

    Raises:
        VerificationError: a link stays off after ``max_attempts`` (or light blames no TBU a
            re-route could avoid); the chip was restored before raising.
        FabricError: the recovery cannot be computed (as without light; when a repair's
            re-route cannot close, the message also names the link light rejected).
    """
    avoid: dict[int, str] = {}
    attempts: list[dict[str, Any]] = []
    for k in range(max_attempts):
        try:
            rec = effects.compute(dict(avoid))
        except FabricError as exc:
            if not attempts:
                raise
            raise VerificationError(f"{attempts[-1]['refusal']}; re-routing around the {len(avoid)} suspect "
                                    f"TBUs cannot close: {exc}", attempts) from None
        effects.apply(rec)
        checks = effects.measure(rec, effects.before)
        bad = blocking(checks)
        record = {"attempt": k + 1, "avoided": _names(avoid, tbu_names), **summary(checks)}
        if not bad or not repair:
            attempts.append(record)
            return Verified(rec, record, tuple(attempts), avoid)
        routes = [lk.route.tbus for lk in rec.plan.links]
        blamed = suspects(checks, routes)
        record["suspect_tbus"] = [tbu_names[t] for t in blamed]
        record["refusal"] = refusal_line(bad, blamed, tbu_names)
        attempts.append(record)
        effects.restore(rec, record["refusal"])
        nxt = to_avoid(blamed, checks, routes, avoid)
        if not nxt or not any(b.rerouted for b in bad):
            break
        avoid.update(dict.fromkeys(nxt, "dead"))
    raise VerificationError(attempts[-1]["refusal"] + f" (after {len(attempts)} attempt"
                            f"{'s' if len(attempts) > 1 else ''}; the chip holds what it held before)",
                            attempts)


def refusal_line(bad: Sequence[LinkLight], blamed: Sequence[int], tbu_names: Sequence[str]) -> str:
    """One sentence: the first link light rejected, measured vs planned, and what light blames."""
    first = bad[0]
    what = "re-routed link" if first.rerouted else "held link (fine before this recovery)"
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    named = ", ".join(tbu_names[t] for t in blamed[:SHOWN_SUSPECTS])
    extra = f" and {len(blamed) - SHOWN_SUSPECTS} more" if len(blamed) > SHOWN_SUSPECTS else ""
    blame = f"; suspect TBUs {named}{extra}" if blamed else ""
    return (f"light verification failed: {what} {first.describe()}, beyond the {ROUTE_TOL_DB:g} dB "
            f"tolerance{more}{blame}")


def _names(avoid: Mapping[int, str], tbu_names: Sequence[str]) -> list[str]:
    return [tbu_names[t] for t in avoid]


def with_avoided(plan: Any, avoid: Mapping[int, str]) -> Any:
    """``plan`` with ``avoid`` added to its failed TBUs (a repair routes around them)."""
    return replace(plan, failed_tbus={**plan.failed_tbus, **avoid}) if avoid else plan

"""The fabric's verify stage (photonics.fabric.verify): judging links by light, blaming TBUs,
and the bounded repair loop over injected effects."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from photonics.fabric import FabricError
from photonics.fabric.verify import (
    MAX_ATTEMPTS,
    Effects,
    LinkLight,
    VerificationError,
    blocking,
    summary,
    suspects,
    to_avoid,
    verified_recovery,
)
from photonics.tolerances import HELD_TOL_DB, ROUTE_TOL_DB


def _link(i, rerouted, planned, measured, before=None, meter="transceivers"):
    return LinkLight(i, f"a{i}->b{i}", rerouted, meter if measured is not None else None, planned, measured,
                     before, "" if measured is not None else "no meter")


def test_statuses_follow_the_tolerances():
    assert _link(0, True, -10.0, -10.0 - ROUTE_TOL_DB + 0.01).status == "ok"
    assert _link(0, True, -10.0, -10.0 - ROUTE_TOL_DB - 0.01).status == "off"
    assert _link(0, True, -10.0, math.nan).status == "off"  # a NaN reading is never ok
    assert _link(0, False, -10.0, -10.0, before=-10.0 + HELD_TOL_DB + 0.01).status == "hit"
    assert _link(0, False, -10.0, -10.0, before=-10.0 + HELD_TOL_DB - 0.01).status == "ok"
    assert _link(0, True, -10.0, None).status == "not measured"


def test_a_held_link_already_off_before_does_not_block_but_is_reported_off():
    held_off = _link(0, False, -10.0, -20.0, before=-20.0)
    broke = _link(1, False, -10.0, -20.0, before=-10.0)
    assert held_off.off_before
    assert blocking([held_off, broke]) == [broke]
    s = summary([held_off, _link(2, True, -10.0, -10.1)])
    assert s["status"] == "off"
    assert s["links_off"] == ["a0->b0"]


def test_summary_never_says_ok_for_what_was_not_measured():
    assert summary([_link(0, True, -10.0, None)])["status"] == "not measured"
    assert summary([_link(0, True, -10.0, None), _link(1, True, -10.0, -10.0)])["status"] == "partly measured"
    assert summary([_link(1, True, -10.0, -10.0)])["status"] == "ok"


def test_suspects_are_cleared_by_lit_links_and_held_routes_and_ends_come_last():
    routes = [(1, 2, 3, 4), (4, 5, 6), (7, 8, 9)]  # link 0 off (new), 1 ok (new), 2 held
    checks = [_link(0, True, -10.0, -40.0), _link(1, True, -10.0, -10.0),
              _link(2, False, -10.0, -10.0, -10.0)]
    assert suspects(checks, routes) == (1, 2, 3)  # 4 carries the lit link 1
    assert to_avoid((1, 2, 3), checks, routes, {}) == (2, 3)  # 1 is link 0's own port TBU
    assert to_avoid((1, 2, 3), checks, routes, {2: "dead", 3: "dead"}) == (1,)


def _rec(routes, rerouted):
    links = tuple(SimpleNamespace(route=SimpleNamespace(tbus=r)) for r in routes)
    return SimpleNamespace(plan=SimpleNamespace(links=links), rerouted=rerouted)


class World:
    """A chip whose TBU 5 is bad: a new route through it reads 40 dB low."""

    def __init__(self, bad=(5,), reroute=((1, 5, 6, 2), (1, 7, 8, 2), (1, 9, 10, 2))):
        self.bad, self.reroute = set(bad), list(reroute)
        self.log: list[str] = []

    def compute(self, avoid):
        for r in self.reroute:
            if not set(r) & set(avoid):
                self.log.append(f"compute avoiding {sorted(avoid)}")
                return _rec([r, (20, 21)], (0,))
        raise FabricError("no route closes")

    def apply(self, rec):
        self.log.append(f"apply {rec.plan.links[0].route.tbus}")

    def measure(self, rec, _before):
        r = rec.plan.links[0].route.tbus
        new = _link(0, True, -10.0, -50.0 if set(r) & self.bad else -10.1)
        return [new, _link(1, False, -10.0, -10.0, -10.0)]

    def restore(self, rec, why):
        self.log.append(f"restore {rec.plan.links[0].route.tbus}")

    def effects(self):
        return Effects(self.compute, self.apply, self.measure, self.restore)


def test_a_bad_tbu_is_repaired_around_after_the_chip_is_put_back():
    w = World()
    v = verified_recovery(w.effects(), [f"tbu:{k}" for k in range(30)])
    assert v.verification["status"] == "ok"
    assert set(v.suspect_tbus) == {5, 6}  # interior of the rejected route; ends 1 and 2 kept
    assert w.log == ["compute avoiding []", "apply (1, 5, 6, 2)", "restore (1, 5, 6, 2)",
                     "compute avoiding [5, 6]", "apply (1, 7, 8, 2)"]
    assert [a["status"] for a in v.attempts] == ["off", "ok"]
    assert "measured -50.00 dBm, planned -10.00 dBm" in v.attempts[0]["refusal"]


def test_light_that_never_agrees_is_refused_after_the_bounded_attempts_with_the_chip_put_back():
    w = World(bad=(5, 7, 9, 10, 1, 2), reroute=[(1, 5, 6, 2), (1, 7, 8, 2), (1, 9, 10, 2), (1, 11, 12, 2)])
    with pytest.raises(VerificationError) as err:
        verified_recovery(w.effects(), [f"tbu:{k}" for k in range(30)])
    assert len(err.value.attempts) == MAX_ATTEMPTS
    assert w.log.count("restore (1, 5, 6, 2)") == 1
    applied = sum(line.startswith("apply") for line in w.log)
    assert applied == sum(line.startswith("restore") for line in w.log)  # every attempt put back
    assert "a0->b0 measured -50.00 dBm, planned -10.00 dBm" in str(err.value)


def test_report_mode_keeps_the_first_recovery_and_says_off():
    w = World()
    v = verified_recovery(w.effects(), [f"tbu:{k}" for k in range(30)], repair=False)
    assert v.verification["status"] == "off"
    assert not any(line.startswith("restore") for line in w.log)


def test_the_first_computation_failing_is_the_plain_fabric_refusal():
    w = World(reroute=[])
    with pytest.raises(FabricError) as err:
        verified_recovery(w.effects(), ["tbu:0"])
    assert not isinstance(err.value, VerificationError)


def test_a_link_whose_receiver_gets_other_transmitters_light_within_min_acr_is_off():
    """The audit of session 37: after a failover on a chip whose shared TBU moved 1.0 rad,
    gpu1->spare0 received within 1.2 dB of plan with gpu3's light at 0.9 dB below its own:
    ok by power alone, off by its ACR (its own light over the others' at its receiver)."""
    from photonics.tolerances import MIN_ACR_DB

    spliced = replace(_link(1, True, -5.52, -6.725), others_dbm=-7.659)
    assert spliced.difference_db > -ROUTE_TOL_DB
    assert spliced.acr_db == pytest.approx(0.934)
    assert spliced.status == "off"
    assert "ACR 0.9 dB, under 20 dB" in spliced.describe()
    assert spliced.to_dict()["acr_db"] == pytest.approx(0.934)
    held = replace(_link(3, False, -3.0, -3.1, before=-3.1), others_dbm=-3.1 - MIN_ACR_DB + 0.5)
    assert held.status == "off"  # a held link whose receiver now gets another's light
    assert replace(held, others_dbm=-3.1 - MIN_ACR_DB - 0.5).status == "ok"
    assert _link(0, True, -10.0, -10.0).acr_db is None  # not read: judged by its power alone
    assert summary([spliced])["links_off"] == ["a1->b1"]


class HeldMoves(World):
    """A chip where the spliced link lands on plan but the held link moves 1.5 dB (within the
    3 dB plan tolerance, beyond the 0.5 dB held one)."""

    def measure(self, rec, _before):
        return [_link(0, True, -10.0, -10.1), _link(1, False, -10.0, -11.5, -10.0)]


def test_a_held_link_that_moved_beyond_the_held_tolerance_is_kept_but_never_said_ok():
    """Audit of session 38: a held link moved 0.5-3 dB was 'hit', hitless_by_light false, but the
    verification said ok ('verified: by light', exit 0). It is judged as a multicast tree's held
    branch now (status off, the move named); the recovery is kept (rolling it back would leave the
    failed accelerator's links dark) and nothing is blamed on a TBU."""
    w = HeldMoves()
    v = verified_recovery(w.effects(), [f"tbu:{k}" for k in range(30)])
    assert v.verification["status"] == "off"
    assert v.verification["hitless_by_light"] is False
    assert v.verification["held_change_db"] == pytest.approx(1.5)
    assert v.verification["links_off"] == []  # within its plan: moved, not off
    assert [x["status"] for x in v.verification["links"]] == ["ok", "hit"]
    assert not any(line.startswith("restore") for line in w.log)
    assert v.suspect_tbus == {}


def test_hitless_is_judged_by_the_held_links_move_not_by_their_status():
    """Audit of session 41 (the trust campaign's dark stage): a held link both off its plan and
    moved was "off" by status, not "hit", so hitless_by_light said true beside a 3 dB
    held_change_db; and a link already dark before moves between two floors."""
    moved_off = _link(0, False, -10.0, -14.0, -10.0)  # on plan before, 4 dB down after: off, and moved
    assert moved_off.status == "off"
    v = summary([moved_off])
    assert v["status"] == "off"
    assert v["hitless_by_light"] is False
    assert v["held_change_db"] == pytest.approx(4.0)
    dark_before = _link(1, False, -10.0, -57.0, -60.0)  # already off before: its 3 dB "move" means nothing
    v = summary([dark_before])
    assert v["status"] == "off"
    assert v["links_off"] == ["a1->b1"]
    assert v["hitless_by_light"] is None
    assert v["held_change_db"] is None
    v = summary([dark_before, _link(2, False, -10.0, -10.1, -10.0)])
    assert v["hitless_by_light"] is True
    assert v["held_change_db"] == pytest.approx(0.1)


def test_a_link_whose_transmitter_is_dark_blames_no_tbu():
    """Audit of session 38: a link whose own transmitter's monitor reads it dark was 'off' like any
    other and its TBUs became suspects (routed around, named in the refusal). The meter's reason
    now travels with the reading: the refusal says the source is dark, no TBU is blamed."""
    why = "its transmitter qsfp0 lane 1 reads -70.0 dBm TX: the source is dark"
    dark = replace(_link(0, True, -10.0, -70.0), reason=why)
    assert dark.source_dark
    assert dark.status == "off"
    assert "the source is dark" in dark.describe()
    routes = [(1, 2, 3), (4, 5)]
    assert suspects([dark, _link(1, True, -10.0, -10.0)], routes) == ()
    assert suspects([_link(0, True, -10.0, -70.0), _link(1, True, -10.0, -10.0)], routes) == (1, 2, 3)

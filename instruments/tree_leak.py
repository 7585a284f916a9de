"""A multicast tree's light at the other accelerators' receivers: crosstalk a branch's own power cannot show.

A tree's branches are each read at their own receiver (:mod:`instruments.branch_light`): a
TBU partly off after calibration sends part of the tree's light out of it while every branch
still lands within 3 dB of plan (the trust campaign's multicast stage, seed 9860:
``tbu:0.0.0`` pi/2 off, the splice to spare1 kept `ok` with the tree's light reaching another
receiver at ACR 1.4 dB). So when the trees are placed and after a recovery each tree's source is
lit once by the bench laser and every power meter head at its branches' receivers and at the
*victims* is read in that one setting: the receivers of every accelerator that works and that
the tree does not feed, the tree's own source's included (a failed or pruned receiver's port is
no victim: its share still arrives there, unread). The tree's ACR is
its weakest branch over its strongest victim (two readings of one input: no launch or facet
loss enters it) and must reach :data:`~photonics.tolerances.MIN_ACR_DB` (20 dB; more than 1 % of
the tree's light at a working receiver is a tree leaking into a link), as ``lumion program``
judges a route. A tree the laser or the heads cannot reach is named not measured, never ok.

A dark source is said, never judged (:mod:`instruments.dark_source`, session 39): with the laser
reporting its output off, or every head more than 55 dB under it, the branch and the victim read
the meter's floor and their difference is no ACR (seed 4371, laser off: "puts its light into
gpu4's receiver at -67.22 dBm, -4.4 dB under its weakest branch (-71.66 dBm)", the recovery
refused and the chip to be "calibrated again"). Such a tree is not measured, ``unlit``, its
reason naming the source (and the TBUs every branch crosses: one dead there darkens the tree too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from photonics.tolerances import MIN_ACR_DB

VERIFY_NM = 1550.0  # the power meter's wavelength: the band centre, inside every default lane


@dataclass(frozen=True)
class TreeLeak:
    """One tree lit by the bench laser: its weakest branch and strongest victim (dBm), or why not."""

    source: str
    weakest_branch: str
    branch_dbm: float | None
    victim: str
    victim_dbm: float | None
    reason: str = ""
    unlit: bool = False  # not measured because the source sent no light (reason says): not seen

    @property
    def acr_db(self) -> float | None:
        """Weakest branch over strongest victim (dB); None when not measured."""
        if self.branch_dbm is None or self.victim_dbm is None:
            return None
        return self.branch_dbm - self.victim_dbm

    @property
    def off(self) -> bool:
        """The tree's light reaches a working receiver within MIN_ACR_DB of its weakest branch."""
        acr = self.acr_db
        return acr is not None and not acr >= MIN_ACR_DB

    def to_dict(self) -> dict[str, Any]:
        """JSON form (dB to 1 mdB)."""
        r = lambda x: None if x is None else round(float(x), 3)  # noqa: E731 - one-line rounding
        return {"source": self.source, "weakest_branch": self.weakest_branch,
                "branch_dbm": r(self.branch_dbm), "victim": self.victim, "victim_dbm": r(self.victim_dbm),
                "acr_db": r(self.acr_db), "min_acr_db": MIN_ACR_DB, "status": self.status,
                "reason": self.reason}

    @property
    def status(self) -> str:
        """ok, off, or not measured."""
        return "not measured" if self.acr_db is None else "off" if self.off else "ok"


def tree_leaks(bench: Any, fabric: Any, plan: Any, gone: Iterable[str],
               off_branches: Iterable[str] = ()) -> list[TreeLeak]:
    """Each tree of ``plan`` (a MulticastPlan) lit once: its branches' and victims' heads read.

    ``gone``: accelerators whose receivers are no victims (failed, pruned). ``off_branches``
    (``src->dst``): branches the branch check found off their plan; a tree's ACR is held to its
    weakest *other* branch, since a dark branch under its plan would make any victim's light
    look like a leak (seed 9960, tbu:0.0.0 dead on gpu0->gpu2 as placed: "ACR" -52 dB, a leak
    that was the branch's own darkness, already reported off).
    """
    from photonics.fabric.multicast import group_ports

    out, skip, off = [], set(gone), set(off_branches)
    for (src, dsts), (tx, rxs), tree in zip(plan.groups, group_ports(fabric, plan.groups), plan.trees,
                                            strict=True):
        # every working receiver the tree does not feed, its own source's included: light sent back
        # into gpu0's receiver is light in a receiver, as in any idle one (before session 39 it was
        # left out: seed 9960, 5 K warmer, the splice's tree at ACR 17.7 dB into gpu0, exit 0)
        victims = [p for a in fabric.accelerators if a.name not in {*dsts} | skip for p in a.rx]
        trunk = set.intersection(*[set(b.tbus) for b in tree.branches]) if tree.branches else set()
        lit = [f"{src}->{d}" not in off for d in dsts]
        out.append(_lit(bench, fabric, src, tx, (dsts, rxs, lit), victims,
                        [bench.mesh.tbu_names[t] for t in sorted(trunk)]))
    return out


def _lit(bench: Any, fabric: Any, src: str, tx: int, branches: tuple[Any, Any],
         victims: list[int], trunk: list[str]) -> TreeLeak:
    """One tree's source lit, its branches' (receiver names, ports, on plan) and victims' heads
    read in one setting; not measured (``unlit``) when the source sent no light (module
    docstring; ``trunk``: the TBUs every branch crosses), nor when no branch is on its plan.
    """
    from instruments.dark_source import dark_readings, laser_off
    from instruments.state_check import laser_mw

    mesh, (dsts, rxs, on_plan) = bench.mesh, branches
    heads = getattr(bench, "meter_channels", {})
    if getattr(bench, "laser", None) is None or tx not in getattr(bench, "switch_outputs", {}):
        return TreeLeak(src, "", None, "", None, f"no laser switch output feeds {mesh.port_names[tx]}")
    unread = [mesh.port_names[p] for p in [*rxs, *victims] if p not in heads]
    if unread:
        return TreeLeak(src, "", None, "", None, f"no power meter head at {', '.join(unread)}")
    if not victims:
        return TreeLeak(src, "", None, "", None, "no working receiver outside the tree")
    off = laser_off(bench)
    if off:  # nothing sent: nothing to read
        return TreeLeak(src, "", None, "", None, off, unlit=True)
    bench.select_input(tx, VERIFY_NM)
    dbm = [float(x) for x in bench.read_powers_dbm([*rxs, *victims])]
    dark = dark_readings([max(dbm)], 10 * math.log10(laser_mw(bench)), trunk)
    if dark:
        return TreeLeak(src, "", None, "", None, dark, unlit=True)
    held_to = [i for i in range(len(rxs)) if on_plan[i]]
    if not held_to:
        return TreeLeak(src, "", None, "", None, "every branch is off its plan (said there): none to hold "
                        "the tree's leaks against")
    k = min(held_to, key=lambda i: dbm[i])
    v = max(range(len(victims)), key=lambda i: dbm[len(rxs) + i])
    victim = f"{fabric.owner(victims[v])} ({mesh.port_names[victims[v]]})"
    return TreeLeak(src, f"{src}->{dsts[k]}", dbm[k], victim, dbm[len(rxs) + v])


def judge_leaks(v: dict[str, Any], why: str | None, leaks: list[TreeLeak], leaked: Iterable[str] = (),
                refused: str = "the recovery") -> tuple[dict[str, Any], str | None]:
    """The branches' verification ``v`` and refusal ``why`` with the trees' leaks added: a tree
    off makes ``v`` off and, unless its source is in ``leaked`` (it leaked before this change:
    reported, not its doing), refuses the change (``refused`` names it in the line); a dark
    source makes ``v`` off with ``dark``.
    """
    before = set(leaked)
    if any(x.off for x in leaks):
        v = {**v, "status": "off"}
    unlit = next((x.reason for x in leaks if x.unlit), None)
    if unlit and not v.get("dark"):  # the laser sent nothing: the trees' light was not seen
        v = {**v, "status": "off", "dark": unlit}
    if unlit and why:  # a branch refused on the power meter's floor: the source may be why (one
        # source lit cannot tell a dead laser from a TBU absorbing its light: both are named)
        why = f"{why}; {unlit}"
    return v, why or leak_refusal([x for x in leaks if x.source not in before], refused=refused)


def leak_refusal(leaks: list[TreeLeak] | list[dict[str, Any]], what: str = "",
                 refused: str = "the recovery") -> str | None:
    """One line naming the first tree whose light reaches a working receiver, or None.

    ``leaks``: :class:`TreeLeak` (or their JSON forms); ``what``: what light found leaking
    (e.g. "the trees as placed"), else ``refused``: what light refused.
    """
    bad = next((x if isinstance(x, dict) else x.to_dict() for x in leaks
                if (x["status"] if isinstance(x, dict) else x.status) == "off"), None)
    if bad is None:
        return None
    lead = f"light says {what} leak" if what else f"light refused {refused}"
    return (f"{lead}: the tree from {bad['source']} puts its light into {bad['victim']}'s "
            f"receiver at {bad['victim_dbm']:.2f} dBm, {bad['acr_db']:.1f} dB under its weakest branch "
            f"{bad['weakest_branch']} "
            f"({bad['branch_dbm']:.2f} dBm; ACR under {MIN_ACR_DB:g} dB, by the power meter)")

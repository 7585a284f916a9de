"""The allocators and the event simulation: invariants under random traces, splicing, the baseline."""

from __future__ import annotations

import itertools
import os
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from photonics.budget import link_budget
from photonics.rack import (
    BaselineAllocator,
    FabricAllocator,
    FailureModel,
    RackError,
    TraceJob,
    crossing_loss_db,
    default_rack,
    run_simulation,
    simulate_trace,
    synthetic_trace,
)
from photonics.rack.circuits import _nominal_graph
from photonics.routing import conflicts, route_loss_db

RACK = default_rack()
#: random traces the invariants are checked on: every event of each runs the whole fabric check
#: under both policies (~1 s of CPU a trace). The suite's 4 are a new draw each run;
#: LUMION_RACK_EXAMPLES=50 (or more) is the long version.
RACK_EXAMPLES = int(os.environ.get("LUMION_RACK_EXAMPLES", "4"))


def check_fabric_state(sim):
    """Every invariant the fabric's occupancy must keep after any event."""
    alloc = sim.allocator
    occ = alloc.occupancy
    fibres = {f.name: f for f in RACK.fibres}
    assert set(occ.circuits) == set(sim.running)  # departures free everything
    for name, run in sim.running.items():
        assert sorted(alloc.members[name]) == sorted(run.members)
        for c in occ.circuits[name]:
            assert set(c.link) <= set(run.members)
            a, b = RACK.accelerator(c.link[0]), RACK.accelerator(c.link[1])
            # the circuit starts at a's TX lane and ends at b's RX lane, through a fibre if needed
            assert c.segments[0][1].src == a.tx[c.layer]
            assert c.segments[-1][1].dst == b.rx[c.layer]
            assert bool(c.fibres) == (a.mesh != b.mesh)
            assert len(c.segments) == len(c.fibres) + 1
            assert c.segments[0][0] == a.mesh
            assert c.segments[-1][0] == b.mesh
            for (m1, r1), (m2, r2), f in zip(c.segments, c.segments[1:], c.fibres, strict=False):
                assert fibres[f].ends(m1) == (r1.dst, m2, r2.src)  # the fibre joins the segments
            loss = sum(route_loss_db(_nominal_graph(RACK.mesh_specs[m]), r) for m, r in c.segments)
            loss += sum(crossing_loss_db(fibres[f]) for f in c.fibres)
            assert c.loss_db == pytest.approx(loss)
            assert link_budget(loss, RACK.transceiver, RACK.transceiver).margin_db >= RACK.required_margin_db
    # no fibre in two jobs, nor twice in one round
    users = defaultdict(set)
    for name, cs in occ.circuits.items():
        seen = set()
        for c in cs:
            for f in c.fibres:
                users[f].add(name)
                assert (c.round, f) not in seen
                seen.add((c.round, f))
    assert all(len(u) == 1 for u in users.values())
    # no TBU arm in two jobs; what is lit together obeys the routing rules on every mesh
    for mesh in RACK.mesh_specs:
        arms: dict[int, str] = {}
        tbus_of: dict[str, set[int]] = defaultdict(set)
        single: list = []
        rounds: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        for name, cs in occ.circuits.items():
            for c in cs:
                for m, r in c.segments:
                    if m != mesh:
                        continue
                    tbus_of[name] |= set(r.tbus)
                    for h in r.hops:
                        for p in (4 * h.tbu + h.entry, 4 * h.tbu + h.exit):
                            assert arms.setdefault(p, name) == name, f"TBU arm {p} in two jobs"
                    (rounds[name][c.round] if name in occ.multi_round else single).append(r)
        m = RACK.mesh(mesh)
        assert conflicts(m, single) == []
        for name, by_round in rounds.items():
            others = set().union(*(t for j, t in tbus_of.items() if j != name))
            assert not (tbus_of[name] & others), "a multi-round job shares a TBU"
            for routes in by_round.values():
                assert conflicts(m, routes) == []


def check_accelerators(sim):
    members = [a for run in sim.running.values() for a in run.members]
    assert len(members) == len(set(members)), "an accelerator in two jobs"
    for name, run in sim.running.items():
        for a in run.members:
            assert sim.owner[a] == name
        assert len(run.members) == run.job.size
        if not run.waiting:
            assert not (set(run.members) & sim.down), "a running job on a failed accelerator"
    assert sum(o is not None for o in sim.owner.values()) == len(members)


def check_baseline(sim):
    ring = list(RACK.workers)
    for run in sim.running.values():
        pos = [ring.index(a) for a in run.members]
        assert all((q - p) % len(ring) == 1 for p, q in itertools.pairwise(pos)), "not contiguous"


jobs_st = st.lists(
    st.tuples(st.floats(0, 6), st.integers(2, 8), st.sampled_from(["ring", "line", "all-to-all"]),
              st.floats(0.2, 4)),
    min_size=1, max_size=7)


@pytest.mark.slow
@settings(max_examples=RACK_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=jobs_st, seed=st.integers(0, 1000), backfill=st.booleans())
def test_invariants_under_random_traces(jobs, seed, backfill):
    trace = [TraceJob(f"j{k}", a, s, p, d) for k, (a, s, p, d) in enumerate(jobs)]
    trace.sort(key=lambda j: j.arrival_h)
    failures = FailureModel(mtbf_h=15.0, repair_h=2.0)  # failures in most runs
    for policy in ("fabric", "baseline"):
        def observe(sim, policy=policy):
            check_accelerators(sim)
            if policy == "fabric":
                check_fabric_state(sim)
                started = {r.job.name for r in sim.running.values() if r.splices == 0}
                for name in started:  # spares are never used to place a job, only to splice
                    assert not any(RACK.accelerator(a).spare for a in sim.running[name].members)
            else:
                check_baseline(sim)

        res = run_simulation(RACK, trace, seed=seed, policy=policy, backfill=backfill, failures=failures,
                             observer=observe)
        m = res.metrics
        assert m.completed + m.rejected == len(trace)
        for key in ("accepted_immediately", "accepted_eventually", "fragmentation", "utilisation",
                    "goodput_fraction"):
            assert 0.0 <= getattr(m, key) <= 1.0 + 1e-9
        for rec in res.jobs:
            if rec.end_h is not None:
                assert rec.end_h >= rec.start_h + rec.duration_h - 1e-9


@pytest.mark.slow
def test_same_seed_same_result_and_same_failure_history():
    trace = synthetic_trace(12, seed=4)
    fm = FailureModel(mtbf_h=30.0)
    a = simulate_trace(RACK, trace, seed=9, failures=fm)
    times, metrics = {}, {}
    for policy in ("fabric", "baseline"):
        fails = []

        def grab(sim, fails=fails):
            fails.append((round(sim.time_h, 9), tuple(sorted(sim.down))))

        run = run_simulation(RACK, trace, seed=9, policy=policy, failures=fm, observer=grab)
        metrics[policy] = run.metrics
        times[policy] = fails
    assert metrics["fabric"] == a  # the second run of the seed (a fabric run is ~2 s of CPU: one reused)
    horizon = min(times["fabric"][-1][0], times["baseline"][-1][0])
    changes = {}
    for p, samples in times.items():  # (time, failed set) each time the failed set changes
        out, last = [], ()
        for t, d in samples:
            if t <= horizon and d != last:
                out.append((t, d))
                last = d
        changes[p] = out
    assert changes["fabric"] == changes["baseline"]  # the same failure history for both policies


def test_a_routing_asked_again_is_answered_from_memory_with_the_same_circuits(monkeypatch):
    """A job laid, released and laid again poses the same routing problem: the occupancy
    answers it from what it kept (the router is not run again), with the circuits it laid the
    first time; a problem around other held routes is routed anew.
    """
    from photonics.rack import circuits

    alloc = FabricAllocator(RACK)
    job = TraceJob("r", 0.0, 4, "ring", 1.0)
    members = alloc.place(job, RACK.names)
    first = list(alloc.circuits("r"))
    calls = []
    real = circuits.route_links
    monkeypatch.setattr(circuits, "route_links", lambda *a, **k: calls.append(a) or real(*a, **k))
    alloc.release("r")
    assert alloc.place(job, RACK.names) == members
    assert alloc.circuits("r") == first
    assert not calls
    alloc.place(TraceJob("s", 0.0, 2, "line", 1.0), [a for a in RACK.names if a not in members])
    assert calls  # around r's circuits: a new problem, routed


def test_splice_prefers_the_local_spare():
    alloc = FabricAllocator(RACK)
    members = alloc.place(TraceJob("r", 0.0, 4, "ring", 1.0), RACK.names)
    assert members == ["gpu0", "gpu1", "gpu2", "gpu3"]
    free = [a for a in RACK.names if a not in members]
    # gpu3 sits in slot 3, next to spare0 (slot 4, the east end): the local spare wins
    assert alloc.splice("r", "gpu3", free) == "spare0"
    assert alloc.members["r"] == ["gpu0", "gpu1", "gpu2", "spare0"]


def test_a_spare_out_of_budget_reach_is_not_spliced():
    alloc = FabricAllocator(RACK)
    alloc.place(TraceJob("r", 0.0, 4, "ring", 1.0), RACK.names)
    # gpu0 -> spare0 runs from the west end to the east end: 0.5 dB short of its budget
    free = ["spare0"]
    before = list(alloc.circuits("r"))
    assert alloc.splice("r", "gpu1", free) is None
    assert alloc.circuits("r") == before  # a refused splice changes nothing


def test_splice_rerouts_only_the_failed_links_and_leaves_other_tenants_alone():
    alloc = FabricAllocator(RACK)
    members = alloc.place(TraceJob("r", 0.0, 4, "ring", 1.0), RACK.names)
    other = alloc.place(TraceJob("o", 0.0, 2, "ring", 1.0), [a for a in RACK.names if a not in members])
    assert members is not None
    assert other is not None
    before = {id(c) for c in alloc.circuits("r")}
    held_other = list(alloc.circuits("o"))
    failed = members[1]
    free = [a for a in RACK.names if a not in members + other]
    new = alloc.splice("r", failed, free)
    assert new is not None
    assert failed not in alloc.members["r"]
    assert new in alloc.members["r"]
    after = alloc.circuits("r")
    kept = [c for c in after if id(c) in before]
    assert all(failed not in c.link and new not in c.link for c in kept)
    assert len(kept) == len([c for c in after if new not in c.link])
    assert {c.link for c in after if c.layer == 0 and new in c.link} == {(members[0], new), (new, members[2])}
    assert alloc.circuits("o") == held_other  # the other tenant is untouched


def test_baseline_contiguous_first_fit_and_no_splice():
    alloc = BaselineAllocator(RACK)
    ring = list(RACK.workers)
    a = alloc.place(TraceJob("a", 0, 4, "ring", 1), ring)
    assert a == ring[:4]
    free = [w for w in ring if w not in a and w != ring[6]]  # a hole at position 6
    b = alloc.place(TraceJob("b", 0, 4, "ring", 1), free)
    assert b == ring[7:11]
    assert alloc.splice("a", a[0], free) is None
    # 7 free workers remain (positions 4, 5 and 11-15) but no 6 of them are contiguous
    assert alloc.place(TraceJob("c", 0, 6, "ring", 1), [w for w in free if w not in b]) is None


def test_bandwidth_per_slice_counts_point_to_point_lanes():
    fab, base = FabricAllocator(RACK), BaselineAllocator(RACK)
    job = TraceJob("p", 0.0, 2, "ring", 1.0)
    fab.place(job, RACK.names)
    base.place(job, list(RACK.workers))
    assert fab.bandwidth("p") == 2.0  # both lanes of both accelerators carry the pair
    assert base.bandwidth("p") == 1.0  # one wired lane each way between neighbours
    ring4 = TraceJob("q", 0.0, 4, "ring", 1.0)
    base2 = BaselineAllocator(RACK)
    base2.place(ring4, list(RACK.workers))
    assert base2.bandwidth("q") == 0.75  # the wrap-around link is relayed


@pytest.mark.slow
def test_failures_splice_on_the_fabric_and_stall_the_baseline():
    trace = [TraceJob("long", 0.0, 8, "ring", 40.0)]
    fm = FailureModel(mtbf_h=20.0, repair_h=5.0, recovery="wait")  # the baseline waits for its repairs
    fab = simulate_trace(RACK, trace, seed=3, policy="fabric", failures=fm)
    base = simulate_trace(RACK, trace, seed=3, policy="baseline", failures=fm)
    assert fab.failures_in_jobs >= 1
    assert base.failures_in_jobs >= 1
    assert fab.splices >= 1
    assert base.splices == 0
    assert base.stalls >= 1
    assert fab.makespan_h < base.makespan_h


def test_torus_baseline_rectangles_and_wired_neighbours():
    alloc = BaselineAllocator(RACK, "torus:4x4")
    w = list(RACK.workers)  # row-major: w[4 r + c] sits at (r, c)
    assert alloc.shapes(4) == [(2, 2), (1, 4), (4, 1)]
    assert alloc.shapes(6) == [(2, 3), (3, 2)]
    assert alloc.shapes(5) == []  # no 5-block in a 4 x 4 torus: such a job never runs there
    a = alloc.place(TraceJob("a", 0, 4, "ring", 1), w)
    assert a == [w[0], w[1], w[5], w[4]]  # a 2 x 2 block in ring (boustrophedon) order
    assert alloc.bandwidth("a") == 1.0  # every ring link is a wired torus link
    assert alloc.neighbours(w[0], w[3])  # the torus wraps
    assert not alloc.neighbours(w[0], w[5])
    b = alloc.place(TraceJob("b", 0, 6, "line", 1), [x for x in w if x not in a])
    assert b is not None
    assert len({divmod(w.index(x), 4)[0] for x in b}) in (2, 3)  # a 2 x 3 or 3 x 2 rectangle
    assert alloc.place(TraceJob("c", 0, 5, "ring", 1), w) is None


def test_torus_baseline_runs_and_refuses_a_bad_shape():
    trace = synthetic_trace(8, seed=2)
    m = simulate_trace(RACK, trace, seed=2, policy="baseline", baseline="torus:4x4")
    assert m.completed + m.rejected == 8
    with pytest.raises(RackError, match="R x C = 16"):
        simulate_trace(RACK, trace, seed=2, policy="baseline", baseline="torus:3x5")


@pytest.mark.parametrize("kw", [{"repair_h": float("inf")}, {"checkpoint_h": 0.0}, {"restart_h": -1.0},
                                {"mtbf_h": float("nan")}, {"mtbf_h": 0.0}])
def test_failure_model_refuses_bad_hours(kw):
    with pytest.raises(RackError, match="hours"):
        FailureModel(**kw)


def test_unknown_policy_refused():
    with pytest.raises(RackError, match="policy must be one of"):
        simulate_trace(RACK, synthetic_trace(2, seed=0), seed=0, policy="magic")


def test_a_job_that_can_never_run_is_rejected_at_arrival():
    trace = [TraceJob("five", 0.0, 5, "ring", 1.0), TraceJob("big", 0.0, 17, "ring", 1.0),
             TraceJob("two", 0.5, 2, "ring", 1.0)]
    fm = FailureModel(mtbf_h=float("inf"))
    torus = run_simulation(RACK, trace, seed=0, policy="baseline", baseline="torus:4x4", failures=fm)
    fabric = run_simulation(RACK, trace, seed=0, policy="fabric", failures=fm)
    by = {r.name: r for r in torus.jobs}
    assert by["five"].rejected  # no 5-block in a 4 x 4 torus
    assert by["big"].rejected  # more than the 16 workers
    assert by["two"].start_h == 0.5  # nothing blocked the queue behind them
    fb = {r.name: r for r in fabric.jobs}
    assert not fb["five"].rejected
    assert fb["five"].end_h == 1.0
    assert fb["big"].rejected

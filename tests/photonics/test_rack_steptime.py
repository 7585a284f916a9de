"""A job's step on what it holds (photonics.rack.steptime) and the re-queueing recovery (issue 30)."""

from __future__ import annotations

import pytest

from photonics.collectives import CostModel
from photonics.rack import (
    BaselineAllocator,
    FabricAllocator,
    FailureModel,
    RackError,
    StepModel,
    TraceJob,
    default_rack,
    run_simulation,
    simulate_trace,
    synthetic_trace,
)
from photonics.rack.steptime import fixed_comm_ms, ideal_comm_ms, rate, rounds_comm_ms, switch_time_ms

RACK = default_rack()
MODEL = StepModel()
NO_FAILURES = FailureModel(mtbf_h=float("inf"))


def ring_links(n, lanes=1):
    return {(i, (i + 1) % n): lanes for i in range(n)}


def test_two_lanes_halve_the_ring_all_reduce_and_a_relayed_link_costs_hops_not_bytes():
    one = fixed_comm_ms("ring", 4, ring_links(4), MODEL)
    two = fixed_comm_ms("ring", 4, ring_links(4, 2), MODEL)
    hops = 2 * 3 * MODEL.cost.alpha_ms  # 2(n - 1) steps, one hop each
    assert two - hops == pytest.approx((one - hops) / 2)
    # an arc a-b-c-d wired both ways: d -> a is relayed d -> c -> b -> a over the idle reverse lanes
    arc = {(0, 1): 1, (1, 2): 1, (2, 3): 1, (1, 0): 1, (2, 1): 1, (3, 2): 1}
    assert fixed_comm_ms("ring", 4, arc, MODEL) == pytest.approx(one + 6 * 2 * MODEL.cost.alpha_ms)
    assert fixed_comm_ms("ring", 4, {(0, 1): 1}, MODEL) == float("inf")  # no path at all


def test_a_faster_lane_or_a_smaller_buffer_shortens_the_step():
    fast = StepModel(cost=CostModel(gbps=40.0))
    small = StepModel(buffer_mb=64.0)
    base = fixed_comm_ms("ring", 8, ring_links(8), MODEL)
    assert fixed_comm_ms("ring", 8, ring_links(8), fast) < base / 3
    assert fixed_comm_ms("ring", 8, ring_links(8), small) < base / 3


def test_reconfiguration_is_paid_between_rounds():
    rounds = [{(0, 1): 1, (1, 0): 1, (2, 3): 1, (3, 2): 1}, {(0, 2): 1, (2, 0): 1, (1, 3): 1, (3, 1): 1}]
    free = rounds_comm_ms(4, rounds, [0.0, 0.0], MODEL)
    paid = rounds_comm_ms(4, rounds, [30.0, 40.0], MODEL)
    assert paid == pytest.approx(free + 2 * 70.0)  # dispatch and combine both cross every boundary
    before = {"m0": {1: "bar", 2: "cross"}}
    assert switch_time_ms(before, before, False, MODEL.timing, 5.0) == 0.0  # nothing changes, nothing paid
    moved = switch_time_ms(before, {"m0": {1: "cross", 2: "cross", 3: "bar"}}, True, MODEL.timing, 5.0)
    assert moved > 5.0  # two heater pairs written, settled, and the receivers re-lock


@pytest.mark.slow  # 16 s in the quick suite at load 12-27 (issue 29)
def test_every_slice_runs_at_most_at_the_ideal_rate():
    for pattern in ("ring", "line", "all-to-all"):
        for n in (2, 4, 6, 8):
            job = TraceJob("j", 0.0, n, pattern, 1.0)
            fab = FabricAllocator(RACK, step_model=MODEL)
            assert fab.place(job, RACK.names) is not None
            allocs = [fab]
            for topo in ("ring", "torus:4x4"):
                base = BaselineAllocator(RACK, topo)
                if base.place(job, list(RACK.workers)) is not None:
                    allocs.append(base)
            for alloc in allocs:
                r = rate(alloc.comm_ms("j", MODEL), pattern, n, RACK.n_lanes, MODEL)
                assert 0.0 < r <= 1.0 + 1e-12, (pattern, n, alloc.name, r)
    assert rate(ideal_comm_ms("ring", 8, 2, MODEL), "ring", 8, 2, MODEL) == 1.0


@pytest.mark.slow  # 14 s in the quick suite at load 12-27 (issue 29)
def test_the_fabric_lays_an_all_to_all_the_cheaper_way():
    job = TraceJob("a", 0.0, 8, "all-to-all", 1.0)
    switching = FabricAllocator(RACK)  # no step model: matching rounds only, re-programmed every round
    switching.place(job, RACK.names)
    chooser = FabricAllocator(RACK, step_model=MODEL)
    chooser.place(job, RACK.names)
    assert "a" in switching.occupancy.multi_round
    assert chooser.comm_ms("a", MODEL) <= switching.comm_ms("a", MODEL)


def test_bandwidth_speeds_a_job_up():
    """Two lanes finish a ring sooner than one; without the step model they did not (issue 30)."""
    trace = [TraceJob("pair", 0.0, 2, "ring", 10.0)]
    ends = {}
    for lanes in (1, 2):
        sim = run_simulation(RACK, trace, seed=0, policy="fabric", failures=NO_FAILURES, max_lanes=lanes)
        ends[lanes] = sim.jobs[0].end_h
        assert sim.jobs[0].bandwidth == lanes
    assert ends[2] == pytest.approx(10.0)  # the ideal slice: both lanes, direct
    one = rate(fixed_comm_ms("ring", 2, {(0, 1): 1, (1, 0): 1}, MODEL), "ring", 2, 2, MODEL)
    assert ends[1] == pytest.approx(10.0 / one)
    assert ends[1] > 1.1 * ends[2]
    fixed = [run_simulation(RACK, trace, seed=0, policy="fabric", failures=NO_FAILURES, max_lanes=k,
                            step_model=None).jobs[0].end_h for k in (1, 2)]
    assert fixed == [10.0, 10.0]  # the old model: run time blind to bandwidth


def test_shedding_lanes_slows_a_running_job_down():
    """A slice that lends its extra lane to a newcomer steps slower from that moment on."""
    trace = [TraceJob("first", 0.0, 3, "ring", 10.0), TraceJob("crowd", 1.0, 10, "ring", 2.0)]
    sim = run_simulation(RACK, trace, seed=0, policy="fabric", failures=NO_FAILURES)
    first = {r.name: r for r in sim.jobs}["first"]
    alone = run_simulation(RACK, trace[:1], seed=0, policy="fabric", failures=NO_FAILURES).jobs[0]
    assert alone.end_h == pytest.approx(10.0)  # alone it holds both lanes: the ideal slice
    assert 1.0 < first.bandwidth < 2.0  # it lent its second lane to the newcomer for a while
    assert first.end_h > alone.end_h + 0.1


def test_requeue_restarts_on_free_accelerators_sooner_than_waiting_for_the_repair():
    trace = [TraceJob("long", 0.0, 4, "ring", 30.0)]
    ends, counts = {}, {}
    for recovery in ("requeue", "wait"):
        fm = FailureModel(mtbf_h=25.0, repair_h=12.0, recovery=recovery)
        m = simulate_trace(RACK, trace, seed=5, policy="baseline", failures=fm)
        assert m.failures_in_jobs >= 1
        ends[recovery], counts[recovery] = m.makespan_h, (m.stalls, m.requeues)
    assert counts["requeue"][0] == 0
    assert counts["requeue"][1] >= 1
    assert counts["wait"][0] >= 1
    assert counts["wait"][1] == 0
    assert ends["requeue"] < ends["wait"] - 6.0  # at least half a repair saved


def test_a_requeued_job_keeps_its_checkpoint_and_moves_off_the_failed_accelerator():
    trace = [TraceJob("long", 0.0, 4, "ring", 30.0)]
    fm = FailureModel(mtbf_h=25.0, repair_h=12.0)
    seen = []

    def watch(sim):
        run = sim.running.get("long")
        if run is not None:
            seen.append((sim.time_h, tuple(run.members), run.progress_h))
        assert not (set(sim.paused) & set(sim.running))

    sim = run_simulation(RACK, trace, seed=5, policy="baseline", failures=fm, observer=watch)
    rec = sim.jobs[0]
    assert rec.requeues >= 1
    slices = list(dict.fromkeys(m for _, m, _ in seen))
    assert len(slices) >= 2  # it ran on another block after the failure
    progress = [p for _, _, p in seen]
    assert progress == sorted(progress)  # never thrown back beyond its checkpoint
    assert rec.lost_work_acc_h < 4 * 1.0 * rec.requeues + 1e-9  # at most one checkpoint interval per failure


@pytest.mark.slow  # 15 s in the quick suite at load 12-27 (issue 29)
def test_same_seed_same_result_with_the_step_model_and_requeue():
    trace = synthetic_trace(8, seed=2)
    fm = FailureModel(mtbf_h=40.0)
    for policy in ("fabric", "baseline"):
        a = simulate_trace(RACK, trace, seed=2, policy=policy, failures=fm)
        b = simulate_trace(RACK, trace, seed=2, policy=policy, failures=fm)
        assert a == b


@pytest.mark.parametrize("kw", [{"buffer_mb": -1.0}, {"compute_ms": float("nan")},
                                {"buffer_mb": 0.0, "compute_ms": 0.0}])
def test_step_model_refuses_bad_numbers(kw):
    with pytest.raises(RackError):
        StepModel(**kw)


def test_failure_model_refuses_an_unknown_recovery():
    with pytest.raises(RackError, match="recovery must be one of requeue, wait"):
        FailureModel(recovery="pray")

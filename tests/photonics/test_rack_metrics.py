"""The metric definitions on hand-made records: every number checked against arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from photonics.rack import JobRecord, Series, compute_metrics


def test_metrics_by_hand():
    jobs = [
        JobRecord("a", 4, "ring", 2.0, 0.0, 0.0, 2.0, 2.0),            # started at once, done at 2 h
        JobRecord("b", 2, "line", 1.0, 0.0, 2.0, 4.0, 1.0, failures=1, lost_work_acc_h=1.0),
        JobRecord("c", 8, "ring", 1.0, 1.0, None, None, None, rejected=True),
    ]
    # 10 accelerators healthy throughout; busy 4 on [0, 2), 2 on [2, 4); one job waiting on
    # [0, 2) while 6 workers were free and the head (b, size 2) could not be placed: stranded 6.
    series = Series(time_h=np.array([0.0, 2.0, 4.0]), healthy=np.array([10.0, 10.0, 10.0]),
                    busy=np.array([4.0, 2.0, 0.0]), queue=np.array([1.0, 0.0, 0.0]),
                    stranded=np.array([6.0, 0.0, 0.0]))
    m = compute_metrics("fabric", jobs, series, n_workers=8,
                        counts={"failures": 3, "failures_in_jobs": 1, "splices": 1, "stalls": 0})
    assert m.n_jobs == 3
    assert m.completed == 2
    assert m.rejected == 1
    assert m.accepted_immediately == pytest.approx(1 / 3)
    assert m.accepted_eventually == pytest.approx(2 / 3)
    assert m.queue_delay_mean_h == pytest.approx(1.0)        # delays 0 and 2 h
    assert m.queue_delay_p95_h == pytest.approx(1.9)         # numpy's linear percentile of (0, 2)
    assert m.makespan_h == 4.0
    assert m.fragmentation == pytest.approx(6 * 2 / (8 * 4))  # stranded worker-hours / worker-hours
    assert m.bandwidth_per_slice == pytest.approx(1.5)
    assert m.utilisation == pytest.approx((4 * 2 + 2 * 2) / (10 * 4))
    assert m.throughput_jobs_per_h == pytest.approx(2 / 4)
    assert m.goodput_acc_h_per_h == pytest.approx((4 * 2 + 2 * 1) / 4)
    assert m.goodput_fraction == pytest.approx(10 / 12)
    assert m.lost_work_acc_h == 1.0
    d = m.to_dict()
    assert d["policy"] == "fabric"
    assert all(isinstance(v, int | float | str) for v in d.values())


def test_series_integral_stops_at_the_makespan():
    s = Series(np.array([0.0, 1.0, 5.0]), np.ones(3), np.array([2.0, 3.0, 7.0]), np.zeros(3), np.zeros(3))
    assert s.integral(s.busy, 3.0) == pytest.approx(2 * 1 + 3 * 2)
    assert s.integral(s.busy, 6.0) == pytest.approx(2 * 1 + 3 * 4 + 7 * 1)

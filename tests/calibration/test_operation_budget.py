"""The operation budget (``Options.max_operations``) is a limit, not a wish (issue 26).

Before, only rechecks and crosstalk victims gave way to it: the bootstrap, refinement,
diagnosis and the confirmation's re-fits went on past it, and a run could end over budget
saying nothing (hex:2x2 seed 7 below: 1,178 operations against a budget of 1,000).
"""

import pytest

from calibration.budget import BudgetedBench, OperationBudgetError, nominal_operations, operation_budget
from calibration.map import CalibrationRefusedError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.topology import hexagonal, mesh_from_spec, smartlight

FAST = {"points": 12, "refine_points": 16, "crosstalk_repeats": 0}


def bench() -> DirectBench:
    return DirectBench(Chip(hexagonal(2, 2), 7, clock=lambda: 0.0))


@pytest.mark.slow  # 12 s in the quick suite at load 10-18 (issue 29)
def test_a_run_that_needs_more_than_its_budget_is_refused_naming_it_and_never_exceeds_it(tmp_path):
    b = bench()
    ckpt = tmp_path / "map.json.ckpt"
    with pytest.raises(OperationBudgetError) as info:
        calibrate(b, Options(**FAST, max_operations=1000), checkpoint=ckpt, progress=Progress(stream=None))
    assert isinstance(info.value, CalibrationRefusedError)  # lumion calibrate: exit 6
    assert b.operations == 1000
    line = str(info.value)
    assert "\n" not in line
    assert "reached its budget of 1000 set-and-read operations while " in line
    assert "or give a larger --max-operations (Options.max_operations)" in line
    assert "measuring tbu:" in line
    assert not ckpt.exists()


@pytest.mark.slow  # 23 s in the quick suite at load 10-18 (issue 29)
def test_a_run_within_its_budget_is_unchanged_by_it():
    free = calibrate(bench(), Options(**FAST, max_operations=None), progress=Progress(stream=None))
    capped = calibrate(bench(), Options(**FAST, max_operations=free.operations),
                       progress=Progress(stream=None))
    assert capped.operations == free.operations == capped.cmap.quality["operations"]
    assert capped.cmap.failed == free.cmap.failed


def test_the_budgeted_bench_counts_a_resumed_runs_operations():
    """A run resumed after 900 operations on a bench that has done 5 may do 100 more of 1,000."""
    b = bench()
    b.select_input(0)
    for _ in range(5):
        b.read_powers_dbm([1])
    capped = BudgetedBench(b, limit=1000 - 900 + 5, budget=1000, where=lambda: "here")
    for _ in range(100):
        capped.read_powers_dbm([1])
    with pytest.raises(OperationBudgetError, match="budget of 1000 set-and-read operations"):
        capped.read_powers_dbm([1])
    assert b.operations == 105
    assert capped.mesh is b.mesh  # everything else is the bench's own


def test_the_default_budget_follows_the_mesh():
    """A fixed 10,000 refused every healthy square:6x6 chip (13,146-13,708 operations used,
    docs/calibration.md) and every hex:5x10; SmartLight keeps the 10,000 it was measured with."""
    assert operation_budget(Options(), smartlight()) == 10_000
    assert operation_budget(Options(), mesh_from_spec("square:6x6")) >= 13_678 + 360  # + common phases
    big = mesh_from_spec("hex:5x10")
    sweeps_alone = nominal_operations(big.n_tbus, [[]] * big.n_tbus, Options())
    assert operation_budget(Options(), big) > 1.3 * sweeps_alone
    assert operation_budget(Options(max_operations=1000), big) == 1000
    assert operation_budget(Options(max_operations=None), big) is None
    # fewer readings per sweep, a smaller plan, a smaller budget; never below the floor
    assert operation_budget(Options(points=8, refine_points=0), big) < operation_budget(Options(), big)
    assert operation_budget(Options(), hexagonal(1, 1)) == 10_000

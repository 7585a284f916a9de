"""The bootstrap's probe planner with a memory (issue 28): the same probes as plan_probe."""

import numpy as np
import pytest

from calibration.paths import ProbePlanner, plan_probe
from photonics.topology import hexagonal, smartlight


@pytest.mark.parametrize("mesh", [smartlight(), hexagonal(3, 3)], ids=["smartlight", "hex3x3"])
def test_planner_gives_plan_probes_answer_as_the_calibrated_set_grows(mesh):
    """A bootstrap-like sequence: the calibrated set grows one TBU at a time, TBUs become
    banned now and then (a suspect, a path avoided for one TBU). Every answer of the planner
    equals a fresh plan_probe's, and most come from its memory.
    """
    rng = np.random.default_rng(4)
    planner = ProbePlanner(mesh)
    peer = mesh.peer()
    allowed: set[int] = set()
    banned: set[int] = set()
    asked = 0
    order = rng.permutation(mesh.n_tbus)
    for step, new in enumerate(order[: mesh.n_tbus - 4]):
        for t in range(mesh.n_tbus):
            if t in allowed or t in banned:
                continue
            extra = {int(order[-1])} if t % 5 == 0 else set()  # some TBUs avoid one more
            want = plan_probe(mesh, t, allowed, peer, passable=True, banned=banned | extra)
            assert planner.plan(t, allowed, passable=True, banned=banned | extra) == want
            asked += 1
        allowed.add(int(new))
        if step % 17 == 16:
            banned.add(int(order[-2 - step // 17]))
    assert planner.planned < 0.75 * asked  # the memory answers a good share of the questions


def test_planner_replans_when_a_tbu_its_search_looked_at_changes():
    """Calibrating a TBU on the kept probe's path changes the answer: the planner sees it."""
    mesh = smartlight()
    planner = ProbePlanner(mesh)
    first = planner.plan(30, set(), passable=True)
    assert first is not None
    assert first.hops
    on_path = {first.hops[0].tbu}
    assert planner.plan(30, on_path, passable=True) == plan_probe(mesh, 30, on_path, passable=True)
    assert planner.planned == 2

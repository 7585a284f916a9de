"""A broken TBU's healthy neighbours: neither written off nor left wrong unnamed (trust campaign,
seeds 9704 and 9810-9811, docs/calibration.md "A broken TBU's healthy neighbours").

Shorter sweeps than the default (the failures show with them too, on the code before): a few
seconds a chip.
"""

import numpy as np
import pytest

from calibration.confirm import CONFIRM_TOL_RAD
from calibration.procedure import Options, Progress, calibrate
from calibration.records import TBURecord, other_arm_currents, tbu_currents
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import OFF_RAD, make_chip, tbu_errors
from photonics.topology import mesh_from_spec

SHORT = Options(points=12, refine_points=16)


def calibrated(mode: str, seed: int, spec: str, options: Options):
    """(chip, map, names of what the map records failed or unverified, names of TBUs it leaves
    more than OFF_RAD off unnamed) for the trust campaign's chip."""
    chip, _ = make_chip(mode, seed, mesh_from_spec(spec))
    cmap = calibrate(DirectBench(chip), options, progress=Progress(stream=None)).cmap
    names = chip.mesh.tbu_names
    off, _ = tbu_errors(cmap, chip)
    silent = [names[t] for t in range(chip.mesh.n_tbus) if t not in cmap.failed and off[t] > OFF_RAD]
    return chip, cmap, {names[t]: how for t, how in cmap.failed.items()}, silent


@pytest.mark.slow
def test_a_wrong_crosstalk_correction_is_seen_by_light_and_the_law_put_back():
    """square:4x4 seed 9810, shorted heater on tbu:2.2.1: the healthy tbu:1.3.2 ended 0.11 rad
    off, unnamed. Its one light path runs through tbu:2.3.1, whose crosstalk onto it was
    measured through that path with tbu:2.3.1's heater driven past its fitted range (the path
    TBU left cross and leaked into it): 8x the true entry, -0.11 rad of wrong correction in its
    passive offset. Its confirmation went through the fit's own path with the same heaters hot,
    so the error cancelled. Now such a confirmation sets the neighbours through their other
    heaters; light disagrees, agrees with the design law, and the law is used."""
    chip, cmap, named, silent = calibrated("shorted_heater", 9810, "square:4x4", SHORT)
    assert named == {"tbu:2.2.1": "shorted-heater"}
    assert silent == []
    assert any(w.startswith("tbu:1.3.2: crosstalk not confirmed by light") for w in cmap.quality["warnings"])
    off, _ = tbu_errors(cmap, chip)
    assert off[chip.mesh.tbu_index("tbu:1.3.2")] < CONFIRM_TOL_RAD


@pytest.mark.slow
def test_a_dead_tbus_healthy_neighbours_reachable_only_through_each_other_are_calibrated():
    """hex:3x4 seed 9704, dead tbu:1.2.1: its neighbours tbu:1.3.3 and tbu:1.2.2 are reachable
    only through each other (or the dead one). tbu:1.3.3's first fit went dark through the dead
    TBU, and the bootstrap then also avoided every TBU on that path fitted through unknown ones,
    leaving it no path; both healthy neighbours ended "dead: no light path of calibrated TBUs
    reaches it". Now such fits are only doubted: crossed when nothing else is left."""
    _, _, named, silent = calibrated("dead_interior", 9704, "hex:3x4", Options(points=12, refine_points=16,
                                                                                crosstalk_repeats=0))
    assert named == {"tbu:1.2.1": "dead"}
    assert silent == []


def test_other_arm_currents_reach_the_same_split_through_the_other_heater():
    rec = TBURecord(1.1, [0.6, 0.55], [0.004, 0.005], 0.0, [0.0, 0.0], 1.0, 0.0, "refine", 0, [1])
    for frac in (0.0, 1.0):
        usual, other = tbu_currents(rec, frac), other_arm_currents(rec, frac)
        assert [i > 0 for i in usual] == [i == 0 for i in other]  # the heater left at 0 mA is driven

        def theta(c):
            return rec.delta + rec.effect(0, c[0]) - rec.effect(1, c[1])

        assert np.isclose(np.mod(theta(usual) - theta(other) + np.pi, 2 * np.pi) - np.pi, 0.0, atol=1e-9)

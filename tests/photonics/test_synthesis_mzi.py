"""The Mach-Zehnder filter: two arms of unequal length between two couplers on a hex mesh."""

import numpy as np
import pytest

from photonics import synthesis
from photonics.circuit import solve_sparse
from photonics.errors import StateError
from photonics.physics import C_UM_PER_PS, fabricated_params, nominal_params
from photonics.synthesis.mzi import mzi_layout, passband, reachable, sweep
from photonics.synthesis.walks import exit_port, peers
from photonics.topology import hexagonal

CENTRE = 1550.0
TBU_DELAY_PS = 11.25  # nominal group delay of one TBU (photonics.physics.PhysicsDefaults)


def _width(k: int) -> float:
    """Half the free spectral range of arms k nominal TBUs apart, nm."""
    return CENTRE ** 2 / (C_UM_PER_PS * 1e3) / (k * TBU_DELAY_PS) / 2


def _follow(peer, out, arm):
    """Walk ``arm`` from light leaving global port ``out``; the port it leaves by at the end."""
    for hop in arm:
        assert peer[out] == hop.entry
        out = exit_port(hop.entry, hop.arc)
    return out


@pytest.mark.parametrize("k", [2, 4, 6])
def test_the_arms_join_the_splitters_exits_to_one_end_of_the_combiner_k_tbus_apart(k):
    mesh = hexagonal(3, 3)
    lay = mzi_layout(mesh, k)
    peer = peers(mesh)
    side = lay.entry % 4 // 2  # the splitter's entry end; its exits are at the other
    exits = [4 * lay.splitter + 2 * (1 - side) + i for i in (0, 1)]
    starts = [next(e for e in exits if peer[e] == arm[0].entry) for arm in lay.arms]
    assert sorted(starts) == exits  # one arm from each exit
    ends = {int(peer[_follow(peer, e, arm)]) for e, arm in zip(starts, lay.arms, strict=True)}
    assert {p // 4 for p in ends} == {lay.combiner}
    assert len(ends) == 2
    assert len({p % 4 // 2 for p in ends}) == 1  # both ports of one end
    assert len(lay.arms[1]) - len(lay.arms[0]) == k
    assert len(set(lay.tbus.tolist())) == len(lay.tbus)  # no TBU on two walks
    assert len({lay.input_port, *lay.output_ports}) == 3


def test_a_failed_tbu_is_on_no_walk():
    mesh = hexagonal(3, 3)
    first = mzi_layout(mesh, 4)
    dead = int(first.arms[1][2].tbu)
    lay = mzi_layout(mesh, 4, {dead: "dead"})
    assert dead not in lay.tbus.tolist()


@pytest.mark.parametrize(("fabricated", "k"), [(False, 2), (True, 4), (True, 8)],
                         ids=["nominal-k2", "fabricated-k4", "fabricated-k8"])
def test_the_passband_lands_on_the_centre_with_the_bandwidth(fabricated, k):
    """Measured on the reference solver: the peak within 1e-3 of a free spectral range of the
    centre, the width within 1 % of half the free spectral range asked, more than 40 dB deep."""
    mesh = hexagonal(3, 3)
    params = (fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(31)) if fabricated
              else nominal_params(mesh.n_tbus, mesh.n_links))
    s = synthesis.mz_filter(mesh, CENTRE, _width(k), params)
    fsr = s.extra["filter"]["fsr_nm"]
    assert s.extra["filter"]["arm_difference_tbus"] == k
    wl = sweep(CENTRE, fsr)
    y = solve_sparse(mesh, s.state, wl, params, inputs=list(s.inputs))[0][:, list(s.outputs), 0]  # (wl, 2)
    got = passband(wl, np.abs(y[:, 0]) ** 2)
    assert abs(got["centre_nm"] - CENTRE) < 1e-3 * fsr
    assert abs(got["fwhm_nm"] - _width(k)) < 0.01 * _width(k)
    assert got["extinction_db"] > 40
    long_path = len(s.extra["filter"]["arms"][1]) + len(s.tbus) - sum(map(len, s.extra["filter"]["arms"]))
    assert got["max_transmission_db"] > -long_path * 0.5 - 1  # no more lost than the long path's TBUs
    assert s.start[0]["extinction_db"] < got["extinction_db"]  # the refinement balanced the arms
    assert got["centre_nm"] == pytest.approx(s.achieved[0]["centre_nm"], abs=1e-6)  # the report is true
    assert s.configuration is None
    assert "common phases of the arms" in s.not_programmable


def test_a_bandwidth_no_arm_difference_gives_is_refused_naming_those_the_mesh_holds():
    mesh = hexagonal(2, 2)
    with pytest.raises(StateError, match=r"0\.1781 \(2 TBUs\).*0\.0445 \(8 TBUs\) nm") as err:
        synthesis.mz_filter(mesh, CENTRE, 0.05)
    assert "10 TBUs" not in str(err.value)  # hex:2x2 holds no two walks 10 TBUs apart
    assert sorted(reachable(mesh, nominal_params(mesh.n_tbus, mesh.n_links), CENTRE)) == [2, 4, 6, 8]


def test_the_widths_held_are_half_the_free_spectral_range_of_each_arm_difference():
    mesh = hexagonal(3, 3)
    held = reachable(mesh, nominal_params(mesh.n_tbus, mesh.n_links), CENTRE)
    assert sorted(held) == [2, 4, 6, 8, 10, 12]
    for k, w in held.items():
        assert w == pytest.approx(_width(k), rel=1e-12)

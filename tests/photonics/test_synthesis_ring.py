"""The ring filter: a loop of TBUs beside a bus, its notch put at a centre with a bandwidth."""

import numpy as np
import pytest

from photonics import synthesis
from photonics.circuit import solve_sparse
from photonics.errors import StateError
from photonics.physics import fabricated_params, nominal_params
from photonics.synthesis.ring import notch, ring_layout, sweep
from photonics.synthesis.walks import exit_port, peers
from photonics.topology import hexagonal, square

CENTRE, WIDTH = 1550.0, 0.035  # nm: a width the 6-TBU loop meets near critical coupling


def test_the_layout_is_a_closed_loop_through_the_coupler_with_a_bus_to_two_ports():
    mesh = hexagonal(2, 2)
    lay = ring_layout(mesh)
    assert len(lay.loop_tbus) == 6  # a hexagonal cell
    peer = peers(mesh)
    out = exit_port(lay.entry, lay.arc)  # walking the loop's arcs from the coupler comes back to it
    for hop in lay.loop:
        assert peer[out] == hop.entry
        out = exit_port(hop.entry, hop.arc)
    assert peer[out] == lay.entry
    assert lay.input_port != lay.output_port
    assert not {h.tbu for h in lay.bus} & set(lay.loop_tbus.tolist())


@pytest.mark.slow  # 10 s in the quick suite at load 12-27 (issue 29)
@pytest.mark.parametrize("fabricated", [False, True], ids=["nominal", "fabricated"])
def test_the_notch_lands_on_the_centre_with_the_bandwidth(fabricated):
    mesh = hexagonal(2, 2)
    params = (fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(31)) if fabricated
              else nominal_params(mesh.n_tbus, mesh.n_links))
    s = synthesis.ring_filter(mesh, CENTRE, WIDTH, params)
    fsr = s.extra["filter"]["fsr_nm"]
    wl = sweep(CENTRE, fsr)
    y = solve_sparse(mesh, s.state, wl, params, inputs=list(s.inputs))[0, :, s.outputs[0], 0]
    got = notch(wl, np.abs(y) ** 2)  # measured on the reference solver, not the report's
    assert abs(got["centre_nm"] - CENTRE) < 1e-3 * fsr
    assert abs(got["fwhm_nm"] - WIDTH) < 0.05 * WIDTH
    assert got["extinction_db"] > 20
    assert abs(got["centre_nm"] - s.achieved[0]["centre_nm"]) < 1e-6  # the report tells the truth
    assert abs(got["fwhm_nm"] - s.achieved[0]["fwhm_nm"]) < 1e-6
    assert s.configuration is None
    assert "common phase" in s.not_programmable


def test_a_failed_tbu_is_never_on_the_loop_or_the_bus():
    mesh = hexagonal(2, 2)
    first = ring_layout(mesh)
    dead = int(first.loop_tbus[1])
    lay = ring_layout(mesh, {dead: "dead"})
    assert dead not in lay.loop_tbus.tolist()
    assert dead not in [h.tbu for h in lay.bus]


def test_a_bandwidth_wider_than_half_the_free_spectral_range_is_refused():
    with pytest.raises(StateError, match="free spectral range"):
        synthesis.ring_filter(hexagonal(2, 2), CENTRE, 0.1)


def test_a_square_mesh_has_a_four_tbu_loop():
    assert len(ring_layout(square(3, 3)).loop_tbus) == 4

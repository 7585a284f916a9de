"""A unitary on a triangular mesh: the Clements lattice laid in it, then gradient refinement."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import unitary_group

from photonics import synthesis
from photonics.circuit import solve_sparse
from photonics.configuration import Configuration
from photonics.errors import StateError
from photonics.physics import PhysicsDefaults, fabricated_params, nominal_params
from photonics.synthesis.port_phases import fidelity_up_to_port_phases
from photonics.synthesis.triangular_lattice import triangular_lattice
from photonics.synthesis.unitary import NO_COMMON_PHASE, port_phase_tbus, start_fractions
from photonics.topology import hexagonal, triangular

FIDELITY = 0.999  # stated in docs/synthesis.md: a refined unitary on the chip model it was refined on
TBU_LOSS_DB = 0.5  # nominal loss of one TBU (photonics.physics.PhysicsDefaults)


@pytest.mark.parametrize(("rows", "cols", "n"), [(2, 3, 2), (3, 4, 3), (4, 6, 3), (5, 8, 4), (6, 7, 6)])
def test_the_lattice_carries_every_mode_to_its_own_output(rows, cols, n):
    """Every block set to pass modes on, on a lossless chip: input mode j reaches output mode j
    and nothing else, and inputs and outputs are 2n distinct mesh ports."""
    mesh = triangular(rows, cols)
    lat = triangular_lattice(mesh, n)
    params = nominal_params(mesh.n_tbus, mesh.n_links, PhysicsDefaults().lossless())
    state = Configuration(start_fractions(mesh, lat, np.eye(n)), mesh=mesh).heater_state()
    p = np.abs(solve_sparse(mesh, state, [1550.0], params, inputs=list(lat.inputs))[0, 0]) ** 2
    np.testing.assert_allclose(p[list(lat.outputs)], np.eye(n), atol=1e-9)
    assert len(set(lat.inputs) | set(lat.outputs)) == 2 * n
    assert len(lat.blocks) >= n * (n - 1) // 2  # room for every block of the decomposition


def test_the_lattice_refuses_a_mesh_too_small_or_not_triangular_naming_the_size_it_needs():
    with pytest.raises(StateError, match=r"triangular:4x5"):
        triangular_lattice(triangular(4, 4), 4)  # 4 triangles per row: 3 lattice columns
    with pytest.raises(StateError, match=r"triangular:4x5"):
        triangular_lattice(triangular(3, 9), 4)  # 3 rows hold 3 modes
    with pytest.raises(StateError, match="triangular mesh"):
        triangular_lattice(hexagonal(2, 2), 2)


@pytest.mark.parametrize("fabricated", [False, True], ids=["nominal", "fabricated"])
def test_a_random_unitary_is_met_on_a_triangular_mesh(fabricated):
    """Haar-random 4x4 on triangular:4x5, on the nominal chip and on a seeded fabricated one
    (every parameter known): fidelity >= FIDELITY, the light stays on the lattice's paths."""
    mesh = triangular(4, 5)
    params = (fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(4), kappa_spread=0.01)
              if fabricated else nominal_params(mesh.n_tbus, mesh.n_links))
    u = unitary_group.rvs(4, random_state=11)
    s = synthesis.unitary(mesh, u, params, [1550.0])
    assert s.start[0]["fidelity"] < 0.9  # the splits alone do not do it: the refinement does
    assert s.achieved[0]["fidelity"] > FIDELITY
    # every mode crosses 2n + 3 TBUs (n + 1 blocks or pass-throughs, n + 2 diagonals)
    assert s.achieved[0]["loss_db"] < (2 * 4 + 3) * TBU_LOSS_DB + 0.5
    assert s.achieved[0]["worst_crosstalk_db"] < -20
    assert s.configuration is None
    assert "common phase" in s.not_programmable
    # the report is what the state does: the fidelity again from the reference solver
    v = solve_sparse(mesh, s.state, [1550.0], params, inputs=list(s.inputs))[0, 0][list(s.outputs)]
    f = abs(np.trace(u.conj().T @ v)) ** 2 / (4 * (abs(v) ** 2).sum())
    assert f == pytest.approx(s.achieved[0]["fidelity"], rel=1e-9)


def test_a_failed_tbu_on_the_triangular_lattice_is_refused_by_name():
    mesh = triangular(3, 4)
    t = int(triangular_lattice(mesh, 3).tbus[5])
    with pytest.raises(StateError, match=mesh.tbu_names[t]):
        synthesis.unitary(mesh, np.eye(3), failed={t: "unverified"})


def test_a_hexagonal_mesh_is_refused_naming_the_meshes_that_hold_a_unitary():
    with pytest.raises(StateError, match="triangular:RxC"):
        synthesis.unitary(hexagonal(3, 3), np.eye(2))


def test_a_tbu_without_a_common_phase_is_used_only_where_its_phase_is_a_ports():
    """A map's TBU whose common phase light could not tell (corners of a triangular mesh) may
    carry one mode between its port and its first or last block: a common phase there changes
    the realised matrix only by port phases; anywhere else it is refused by name."""
    mesh = triangular(3, 4)
    lat = triangular_lattice(mesh, 3)
    edge = port_phase_tbus(mesh, lat)
    inner = sorted(set(lat.tbus.tolist()) - edge)
    assert edge
    assert inner
    u = unitary_group.rvs(3, random_state=2)
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    s = synthesis.unitary(mesh, u, params, failed=dict.fromkeys(edge, NO_COMMON_PHASE))
    rng = np.random.default_rng(5)
    for tbus, moved in ((sorted(edge), False), (inner[:1], True)):
        shift = np.zeros(mesh.n_tbus)
        shift[tbus] = rng.uniform(0.5, 2.5, len(tbus))  # rad, on both arms: a common phase
        off = replace(params, offset_top=params.offset_top + shift, offset_bot=params.offset_bot + shift)
        v = solve_sparse(mesh, s.state, [1550.0], off, inputs=list(s.inputs))[0, 0][list(s.outputs)]
        fid = fidelity_up_to_port_phases(u, v)
        assert (fid < 0.99) if moved else (fid > s.achieved[0]["fidelity"] - 1e-6)  # leaks: ~3e-8
    with pytest.raises(StateError, match=rf"{mesh.tbu_names[inner[0]]} \(no common phase\)"):
        synthesis.unitary(mesh, u, params, failed={inner[0]: NO_COMMON_PHASE})
    with pytest.raises(StateError, match="dead"):
        synthesis.unitary(mesh, u, params, failed={min(edge): "dead"})

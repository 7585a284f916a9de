"""Synthesis: Clements decomposition, the lattice in a square mesh, unitaries, splitters, couplers."""

import numpy as np
import pytest
from scipy.stats import unitary_group

from photonics import synthesis
from photonics.circuit import solve
from photonics.configuration import Configuration
from photonics.errors import StateError
from photonics.physics import PhysicsDefaults, fabricated_params, nominal_params
from photonics.synthesis.clements import Block, decompose, lattice_columns, reconstruct
from photonics.synthesis.square_lattice import square_lattice
from photonics.synthesis.unitary import start_fractions
from photonics.topology import hexagonal, smartlight, square

FIDELITY = 0.999  # what a refined unitary must reach on the chip model it was refined on


@pytest.mark.parametrize("n", [2, 3, 5, 6])
def test_clements_rebuilds_the_unitary_in_n_columns(n):
    u = unitary_group.rvs(n, random_state=n)
    blocks, d = decompose(u)
    assert len(blocks) == n * (n - 1) // 2
    np.testing.assert_allclose(reconstruct(blocks, d), u, atol=1e-12)
    assert max(lattice_columns(blocks, n)) <= n - 1  # the lattice has n columns


def test_a_matrix_that_is_not_unitary_is_refused():
    with pytest.raises(StateError, match="not unitary"):
        decompose(np.array([[1.0, 0.1], [0.0, 1.0]]))


@pytest.mark.parametrize(("rows", "cols", "n"), [(4, 4, 4), (3, 5, 3), (6, 6, 6)])
def test_the_lattice_carries_every_mode_to_its_own_output(rows, cols, n):
    """Every block set to pass modes on: input mode j reaches output mode j and nothing else."""
    mesh = square(rows, cols)
    lat = square_lattice(mesh, n)
    params = nominal_params(mesh.n_tbus, mesh.n_links, PhysicsDefaults().lossless())
    state = Configuration(start_fractions(mesh, lat, np.eye(n)), mesh=mesh).heater_state()
    p = np.abs(solve(mesh, state, [1550.0], params, inputs=list(lat.inputs))[0, 0]) ** 2
    np.testing.assert_allclose(p[list(lat.outputs)], np.eye(n), atol=1e-9)
    assert len(set(lat.inputs) | set(lat.outputs)) == 2 * n


def test_the_lattice_refuses_a_mesh_too_small_or_not_square():
    with pytest.raises(StateError, match="at least 5x5"):
        square_lattice(square(4, 6), 5)
    with pytest.raises(StateError, match="square mesh"):
        square_lattice(smartlight(), 2)


@pytest.mark.parametrize("fabricated", [False, True], ids=["nominal", "fabricated"])
def test_a_random_unitary_is_met_on_the_chip_model(fabricated):
    mesh = square(4, 4)
    rng = np.random.default_rng(4)
    params = (fabricated_params(mesh.n_tbus, mesh.n_links, rng, kappa_spread=0.01) if fabricated
              else nominal_params(mesh.n_tbus, mesh.n_links))
    u = unitary_group.rvs(4, random_state=11)
    s = synthesis.unitary(mesh, u, params, [1550.0])
    assert s.start[0]["fidelity"] < 0.9  # the splits alone do not do it: the refinement does
    assert s.achieved[0]["fidelity"] > FIDELITY
    # the light stays on the lattice: loss within 0.5 dB of 0.5 dB per TBU along the 9-TBU paths
    assert s.achieved[0]["loss_db"] < 9 * 0.5 + 0.5
    assert s.achieved[0]["worst_crosstalk_db"] < -20
    assert s.configuration is None
    assert "common phase" in s.not_programmable
    # the report is what the state does: recompute the fidelity from a solve
    v = solve(mesh, s.state, [1550.0], params, inputs=list(s.inputs))[0, 0][list(s.outputs)]
    f = abs(np.trace(u.conj().T @ v)) ** 2 / (4 * (abs(v) ** 2).sum())
    assert f == pytest.approx(s.achieved[0]["fidelity"], rel=1e-12)


def test_a_failed_tbu_on_the_lattice_is_refused_by_name():
    mesh = square(3, 3)
    t = int(square_lattice(mesh, 3).tbus[4])
    with pytest.raises(StateError, match=mesh.tbu_names[t]):
        synthesis.unitary(mesh, np.eye(3), failed={t: "dead"})


def test_splitter_meets_its_ratios_and_program_sets_it_through_the_configuration():
    mesh = smartlight()
    rng = np.random.default_rng(8)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    s = synthesis.splitter(mesh, 1, [4, 8, 12, 20], [1, 2, 3, 4], params, [1550.0])
    want = np.array([0.1, 0.2, 0.3, 0.4])
    assert s.start[0]["max_share_error"] > 0.05  # the tree's equal split is far off
    assert s.achieved[0]["max_share_error"] < 1e-3
    # the configuration, as `lumion program` reads it, sets the same differential phases
    conf = Configuration.from_dict(s.configuration.to_dict(mesh), mesh)
    again = conf.heater_state(params.offset_top, params.offset_bot)
    p = np.abs(solve(mesh, again, [1550.0], params, inputs=[1])[0, 0, [4, 8, 12, 20], 0]) ** 2
    np.testing.assert_allclose(p / p.sum(), want, atol=1e-3)
    assert {r.dst for r in conf.routes} == {4, 8, 12, 20}


def test_splitter_avoids_failed_tbus():
    mesh = smartlight()
    first = synthesis.splitter(mesh, 1, [4, 12], [1, 1])
    failed = {first.tbus[len(first.tbus) // 2]: "dead"}
    again = synthesis.splitter(mesh, 1, [4, 12], [1, 1], failed=failed)
    assert not set(failed) & set(again.tbus)
    assert again.achieved[0]["max_share_error"] < 1e-3


@pytest.mark.parametrize("kappa", [0.0, 0.3, 0.5])
def test_coupler_meets_its_coupling(kappa):
    s = synthesis.coupler(square(3, 3), kappa, wavelengths_nm=[1545.0, 1550.0])
    target = np.array([[1 - kappa, kappa], [kappa, 1 - kappa]])
    for row in s.achieved:
        np.testing.assert_allclose(row["shares"], target, atol=2e-3)


@pytest.mark.parametrize("mesh", [hexagonal(3, 3), smartlight()], ids=["hex3x3", "smartlight"])
@pytest.mark.parametrize("kappa", [0.3, 0.5])
def test_coupler_on_a_mesh_without_a_lattice_meets_its_coupling_through_its_configuration(mesh, kappa):
    """Non-square meshes: one TBU walked out to four ports, refined on a fabricated chip; the
    configuration it writes, programmed through the chip's own differential phases, gives the
    same shares (only differential phases matter)."""
    params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(77))
    s = synthesis.coupler(mesh, kappa, params)
    target = np.array([[1 - kappa, kappa], [kappa, 1 - kappa]])
    np.testing.assert_allclose(s.achieved[0]["shares"], target, atol=1e-3)
    assert len(set(s.inputs) | set(s.outputs)) == 4
    state = s.configuration.heater_state(params.offset_top, params.offset_bot)
    p = np.abs(solve(mesh, state, [1550.0], params, inputs=list(s.inputs))[0, 0][list(s.outputs)]) ** 2
    np.testing.assert_allclose(p / p.sum(axis=0), target, atol=1e-3)


def test_bad_targets_are_refused():
    mesh = smartlight()
    with pytest.raises(StateError, match="one ratio per output"):
        synthesis.splitter(mesh, 1, [4, 8], [1])
    with pytest.raises(StateError, match="non-negative"):
        synthesis.splitter(mesh, 1, [4, 8], [1, -1])
    with pytest.raises(StateError, match="coupling"):
        synthesis.coupler(square(3, 3), 1.5)


def test_chip_model_takes_the_maps_differential_phases():
    mesh = square(2, 2)
    delta = np.linspace(0, 1, mesh.n_tbus)
    p = synthesis.chip_model(mesh, delta)
    np.testing.assert_array_equal(p.offset_top - p.offset_bot, delta)
    with pytest.raises(StateError):
        synthesis.chip_model(mesh, delta[:-1])


def test_block_matrix_is_unitary():
    b = Block(0, 0.4, 1.1).matrix()
    np.testing.assert_allclose(b.conj().T @ b, np.eye(2), atol=1e-15)

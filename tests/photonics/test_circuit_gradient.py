"""Exact heater-phase derivatives of the port matrix, against central differences."""

import numpy as np
import pytest

from photonics.circuit import solve
from photonics.circuit_gradient import jacobian, power_jacobian, solve_kept, value_and_grad
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import hexagonal, square, triangular

STEP = 1e-5  # rad: central-difference truncation ~STEP^2, round-off ~1e-16 / STEP, both << 1e-7
REL = 1e-7  # the brief's agreement: relative to the largest derivative


def _chip(mesh, seed):
    rng = np.random.default_rng(seed)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    return params, MeshState.random(mesh, rng, n_states=2)


def _shifted(state: MeshState, tbu: int, arm: int, h: float) -> MeshState:
    top, bot = state.phi_top.copy(), state.phi_bot.copy()
    (top if arm == 0 else bot)[:, tbu] += h
    return MeshState(top, bot)


@pytest.mark.parametrize("mesh", [hexagonal(1, 2), square(2, 2), triangular(1, 3)],
                         ids=["hex1x2", "square2x2", "tri1x3"])
def test_jacobian_equals_central_differences_for_every_heater(mesh):
    params, state = _chip(mesh, 7)
    wl = np.array([1535.0, 1550.0, 1562.0])
    ins, outs = [0, 3], [1, 2, mesh.n_ports - 1]
    Y, dY = jacobian(mesh, state, wl, params, inputs=ins, outputs=outs)
    assert dY.shape == (2, 3, mesh.n_tbus, 2, 3, 2)
    np.testing.assert_allclose(Y, solve(mesh, state, wl, params, inputs=ins)[:, :, outs], atol=1e-13)
    fd = np.empty_like(dY)
    for t in range(mesh.n_tbus):
        for arm in (0, 1):
            hi = solve(mesh, _shifted(state, t, arm, STEP), wl, params, inputs=ins)[:, :, outs]
            lo = solve(mesh, _shifted(state, t, arm, -STEP), wl, params, inputs=ins)[:, :, outs]
            fd[:, :, t, arm] = (hi - lo) / (2 * STEP)
    assert np.abs(fd - dY).max() <= REL * np.abs(dY).max()
    assert np.abs(dY).max() > 0.1  # a real derivative was compared, not zeros


def test_kept_solve_equals_the_production_solve_on_a_large_mesh():
    mesh = hexagonal(3, 6)
    params, state = _chip(mesh, 3)
    wl = np.linspace(1530, 1565, 9)
    np.testing.assert_allclose(solve_kept(mesh, state, wl, params).Y, solve(mesh, state, wl, params),
                               atol=1e-12)


def test_power_jacobian_equals_central_differences():
    mesh = square(2, 3)
    params, state = _chip(mesh, 11)
    wl = np.array([1550.0, 1556.0])
    P, dP = power_jacobian(mesh, state, wl, params, inputs=[1])
    for t in (0, 5, mesh.n_tbus - 1):
        for arm in (0, 1):
            hi = np.abs(solve(mesh, _shifted(state, t, arm, STEP), wl, params, inputs=[1])) ** 2
            lo = np.abs(solve(mesh, _shifted(state, t, arm, -STEP), wl, params, inputs=[1])) ** 2
            fd = (hi - lo) / (2 * STEP)
            assert np.abs(fd - dP[:, :, t, arm]).max() <= REL * np.abs(dP).max()
    np.testing.assert_allclose(P, np.abs(solve(mesh, state, wl, params, inputs=[1])) ** 2, atol=1e-13)


def _weighted_power(Y):
    """A real objective of the port matrix: weighted port powers, summed over wavelengths."""
    w = np.linspace(0.2, 1.0, Y.shape[-2])[:, None] * np.linspace(1.0, 0.5, Y.shape[-1])[None, :]
    return (w * np.abs(Y) ** 2).sum(axis=(1, 2, 3)), 2 * w * np.conj(Y)


def _fidelity(Y):
    """A phase-sensitive objective: |Tr(U^H Y)|^2 against a fixed complex matrix U."""
    U = np.exp(1j * np.arange(Y.shape[-2] * Y.shape[-1]).reshape(Y.shape[-2:]))
    tr = np.einsum("pq,swpq->sw", np.conj(U), Y)
    G = 2 * np.conj(tr)[..., None, None] * np.conj(U)
    return (np.abs(tr) ** 2).sum(axis=1), G


@pytest.mark.parametrize("objective", [_weighted_power, _fidelity])
def test_value_and_grad_equals_central_differences_of_the_objective(objective):
    mesh = hexagonal(2, 2)
    params, state = _chip(mesh, 5)
    wl = np.array([1545.0, 1550.0, 1555.0])
    ins, outs = [0, 2, 4], [5, 7, 9]
    loss, grad = value_and_grad(mesh, state, objective, wl, params, inputs=ins, outputs=outs)
    assert grad.shape == (2, mesh.n_tbus, 2)
    fd = np.empty_like(grad)
    for t in range(mesh.n_tbus):
        for arm in (0, 1):
            hi = value_and_grad(mesh, _shifted(state, t, arm, STEP), objective, wl, params, ins, outs)[0]
            lo = value_and_grad(mesh, _shifted(state, t, arm, -STEP), objective, wl, params, ins, outs)[0]
            fd[:, t, arm] = (hi - lo) / (2 * STEP)
    assert np.abs(fd - grad).max() <= REL * np.abs(grad).max()
    Y = solve(mesh, state, wl, params, inputs=ins)[:, :, outs]
    np.testing.assert_allclose(loss, objective(Y)[0], rtol=1e-12)


@pytest.mark.parametrize("reverse", ["waves", "nodes"])
@pytest.mark.parametrize("ports", [([0, 2, 4], [5, 7, 9]), (None, None)], ids=["3x3", "all"])
@pytest.mark.parametrize(("n_states", "wl"), [(2, [1545.0, 1550.0, 1555.0]), (1, [1550.0])],
                         ids=["lanes", "one"])
def test_each_reverse_pass_equals_central_differences(monkeypatch, reverse, ports, n_states, wl):
    """Both reverse passes (the lit ports' waves, every node's cotangent), whichever the cost
    model would pick, on port subsets and on every port, in the 8-lane build (2 states x 3
    wavelengths: a partly filled lane group) and the one-lane build (one state, one wavelength)."""
    from photonics import circuit_gradient

    monkeypatch.setattr(circuit_gradient, "by_cotangent", lambda gp, n_inputs: reverse == "nodes")
    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(5)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=n_states)
    ins, outs = ports
    loss, grad = value_and_grad(mesh, state, _fidelity, wl, params, inputs=ins, outputs=outs)
    fd = np.empty_like(grad)
    for t in range(mesh.n_tbus):
        for arm in (0, 1):
            hi = value_and_grad(mesh, _shifted(state, t, arm, STEP), _fidelity, wl, params, ins, outs)[0]
            lo = value_and_grad(mesh, _shifted(state, t, arm, -STEP), _fidelity, wl, params, ins, outs)[0]
            fd[:, t, arm] = (hi - lo) / (2 * STEP)
    assert np.abs(fd - grad).max() <= REL * np.abs(grad).max()
    assert np.abs(grad).max() > 0.1  # a real gradient was compared, not zeros
    Y = solve(mesh, state, wl, params, inputs=ins)
    np.testing.assert_allclose(loss, _fidelity(Y if outs is None else Y[:, :, outs])[0], rtol=1e-12)


def test_the_cost_model_takes_node_cotangents_for_an_objective_over_every_input():
    """The lit ports' waves cost a number of multiply-adds per input, every node's cotangent a
    fixed number: a 6-port target keeps the waves, the whole port matrix takes the cotangents
    (2.8x fewer multiply-adds on square:6x6)."""
    from photonics.circuit_gradient import by_cotangent, gradient_plan

    gp = gradient_plan(square(6, 6))
    assert not by_cotangent(gp, 6)
    assert by_cotangent(gp, 48)
    assert 48 * gp.wave_macs > 2.5 * gp.cotangent_macs
    # the node pass runs a multiply-add faster: at 16 inputs it measured 6.15 ms against the
    # waves' 7.39 ms (64 wavelengths) although it counts more multiply-adds (154k against 142k)
    assert 16 * gp.wave_macs < gp.cotangent_macs
    assert by_cotangent(gp, 16)


@pytest.mark.parametrize("reverse", ["waves", "nodes"])
def test_batched_gradient_is_the_same_when_the_sweep_is_too_long_to_keep(monkeypatch, reverse):
    """Past KEEP_BYTES the forward merges run again per chunk: same loss and gradient, on a
    sweep that leaves a partly filled group of lanes (9 wavelengths x 2 states)."""
    from photonics import circuit_gradient

    monkeypatch.setattr(circuit_gradient, "by_cotangent", lambda gp, n_inputs: reverse == "nodes")
    mesh = square(2, 3)
    params, state = _chip(mesh, 13)
    wl = np.linspace(1540.0, 1560.0, 9)
    kept = value_and_grad(mesh, state, _fidelity, wl, params, inputs=[0, 1, 2])
    monkeypatch.setattr(circuit_gradient, "KEEP_BYTES", 0)
    again = value_and_grad(mesh, state, _fidelity, wl, params, inputs=[0, 1, 2])
    np.testing.assert_allclose(again[0], kept[0], rtol=1e-13)
    np.testing.assert_allclose(again[1], kept[1], rtol=1e-12, atol=1e-12 * np.abs(kept[1]).max())
    t, arm = 4, 1
    hi = value_and_grad(mesh, _shifted(state, t, arm, STEP), _fidelity, wl, params, inputs=[0, 1, 2])[0]
    lo = value_and_grad(mesh, _shifted(state, t, arm, -STEP), _fidelity, wl, params, inputs=[0, 1, 2])[0]
    assert np.abs((hi - lo) / (2 * STEP) - again[1][:, t, arm]).max() <= REL * np.abs(again[1]).max()


def test_a_one_tbu_mesh_is_refused_rather_than_read_past_the_merge_table():
    """No merge: the kernels would read the root's waves from a merge row that does not exist."""
    from photonics.errors import StateError
    from photonics.topology import Mesh

    mesh = Mesh("custom", 0, 0, ("tbu:0.0.0",), np.array([[[0.0, 0.0], [1.0, 0.0]]]),
                np.zeros((0, 2), dtype=np.int64), np.array([0, 1, 2, 3]),
                ("port:1", "port:2", "port:3", "port:4"))
    with pytest.raises(StateError, match="one TBU"):
        value_and_grad(mesh, MeshState.uniform(mesh, "bar"), _weighted_power)
    with pytest.raises(StateError, match="one TBU"):
        jacobian(mesh, MeshState.uniform(mesh, "bar"))

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from photonics.circuit import power_db, solve
from photonics.errors import StateError
from photonics.physics import (
    C_UM_PER_PS,
    PhysicsDefaults,
    fabricated_params,
    mzi_transfer,
    nominal_params,
    split_phases,
)
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight, square, triangular

LOSSLESS = PhysicsDefaults().lossless()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["hex", "square", "tri"]))
def test_lossless_mesh_is_unitary_and_reciprocal(seed, kind):
    mesh = {"hex": hexagonal(2, 3), "square": square(2, 3), "tri": triangular(2, 4)}[kind]
    rng = np.random.default_rng(seed)
    params = nominal_params(mesh.n_tbus, mesh.n_links, LOSSLESS)
    S = solve(mesh, MeshState.random(mesh, rng), [1549.0, 1550.3], params)
    for s in S.reshape(-1, mesh.n_ports, mesh.n_ports):
        np.testing.assert_allclose(s.conj().T @ s, np.eye(mesh.n_ports), atol=1e-9)
        np.testing.assert_allclose(s, s.T, atol=1e-12)


def test_lossy_fabricated_mesh_is_reciprocal_and_passive():
    mesh = smartlight()
    rng = np.random.default_rng(3)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    S = solve(mesh, MeshState.random(mesh, rng, n_states=2), [1550.0], params)
    for s in S.reshape(-1, mesh.n_ports, mesh.n_ports):
        np.testing.assert_allclose(s, s.T, atol=1e-12)
        # passive: no input delivers more power than it brought
        assert (np.abs(s) ** 2).sum(axis=0).max() < 1.0


def test_batch_matches_one_by_one():
    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(0)
    batch = MeshState.random(mesh, rng, n_states=3)
    wl = np.array([1545.0, 1550.0, 1555.0])
    S = solve(mesh, batch, wl, inputs=[0, 5])
    for k in range(3):
        one = MeshState(batch.phi_top[k], batch.phi_bot[k])
        for j, w in enumerate(wl):
            np.testing.assert_allclose(S[k, j], solve(mesh, one, w, inputs=[0, 5])[0, 0], atol=1e-13)


@pytest.mark.parametrize("kappa", [(0.5, 0.5), (0.47, 0.52), (0.55, 0.45)])
@pytest.mark.parametrize("dphi", np.linspace(0, 2 * np.pi, 7))
def test_single_tbu_matches_closed_form(single_tbu, kappa, dphi):
    k1, k2 = kappa
    loss_db = 0.5
    params = nominal_params(1, 0)
    params = type(params)(**{**params.__dict__, "kappa1": np.array([k1]), "kappa2": np.array([k2])})
    S = solve(single_tbu, MeshState(np.array([dphi]), np.array([0.0])), [1550.0], params)[0, 0]
    g = 10 ** (-loss_db / 10)
    mix = 2 * np.sqrt(k1 * (1 - k1) * k2 * (1 - k2)) * np.cos(dphi)
    cross = g * (k2 * (1 - k1) + (1 - k2) * k1 + mix)
    bar = g * ((1 - k1) * (1 - k2) + k1 * k2 - mix)
    P = np.abs(S) ** 2
    # ports: 0=a0 1=a1 2=b0 3=b1; forward a->b and backward b->a alike
    np.testing.assert_allclose([P[2, 0], P[3, 0], P[0, 2], P[1, 2]], [bar, cross, bar, cross], atol=1e-12)
    np.testing.assert_allclose(P[:2, :2], 0, atol=1e-30)  # no reflection


@pytest.mark.parametrize("split", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_loss_applies_in_every_state(single_tbu, split):
    top, bot = split_phases(split)
    S = solve(single_tbu, MeshState(np.atleast_1d(top), np.atleast_1d(bot)), 1550.0,
              nominal_params(1, 0, PhysicsDefaults(extinction_ratio_db=np.inf)))[0, 0]
    P = np.abs(S) ** 2
    np.testing.assert_allclose(P[3, 0], 10 ** (-0.05) * split, atol=1e-12)
    np.testing.assert_allclose(P[2, 0] + P[3, 0], 10 ** (-0.05), atol=1e-12)


def test_extinction_bounded_by_coupler_imbalance():
    T = mzi_transfer(0.0, 0.0, 0.5 + 0.0088914, 0.5 + 0.0088914)  # cross state
    er_db = 10 * np.log10(abs(T[1, 0]) ** 2 / abs(T[0, 0]) ** 2)
    assert er_db == pytest.approx(35.0, abs=0.01)
    # no phase setting does better than the bound
    dphis = np.linspace(-0.3, 0.3, 601)
    leak = np.abs(mzi_transfer(dphis, 0.0, 0.5088914, 0.5088914)[..., 0, 0]) ** 2
    assert leak.min() >= abs(T[0, 0]) ** 2 - 1e-15


def test_hexagonal_ring_resonance_spacing():
    """One hexagonal cell as a ring: notches every 1/(6 x 11.25 ps) = 14.81 GHz."""
    mesh = hexagonal(1, 1)
    # TBU 0 couples 30 % into the ring; the other five circulate light in bar.
    top, bot = split_phases(np.array([0.3, 0, 0, 0, 0, 0]))
    params = nominal_params(mesh.n_tbus, mesh.n_links, PhysicsDefaults(extinction_ratio_db=np.inf))
    f = np.linspace(193.30, 193.40, 4001)  # THz
    wl = C_UM_PER_PS / f * 1e3
    inp = int(np.flatnonzero(mesh.port_tbu_ports == 0)[0])  # port at tbu 0 / a0
    out = int(np.flatnonzero(mesh.port_tbu_ports == 2)[0])  # port at tbu 0 / b0 (through)
    S = solve(mesh, MeshState(top, bot), wl, params, inputs=[inp])[0, :, out, 0]
    p = power_db(S)
    minima = np.flatnonzero((p[1:-1] < p[:-2]) & (p[1:-1] < p[2:]) & (p[1:-1] < p.max() - 3)) + 1
    spacing_ghz = np.diff(f[minima]).mean() * 1e3
    assert len(minima) >= 5
    assert spacing_ghz == pytest.approx(1e3 / (6 * 11.25), rel=2e-3)


def test_all_bar_and_all_cross_are_lossy_by_path_length():
    mesh = smartlight()
    S = solve(mesh, MeshState.uniform(mesh, "bar"), 1550.0)[0, 0]
    P = np.abs(S) ** 2
    # each input lands mostly on one output, and its loss is a multiple of 0.5 dB
    best = P.max(axis=0)
    n_tbus = -10 * np.log10(best) / 0.5
    np.testing.assert_allclose(n_tbus, np.round(n_tbus), atol=0.05)


def test_bad_inputs():
    mesh = hexagonal(1, 1)
    with pytest.raises(StateError, match="input ports"):
        solve(mesh, MeshState.uniform(mesh, "bar"), 1550.0, inputs=[99])
    with pytest.raises(StateError, match="positive"):
        solve(mesh, MeshState.uniform(mesh, "bar"), -1.0)
    with pytest.raises(StateError, match="TBUs"):
        solve(mesh, MeshState.uniform(hexagonal(2, 2), "bar"), 1550.0)


def test_a_chip_changed_in_place_is_solved_as_changed():
    """A short sweep keeps the chip's constants between calls (photonics.circuit._chip_constants),
    keyed by the bytes of the chip's arrays: a chip whose arrays change in place (a drift
    simulation, a refit) is solved with its new values, never the kept ones, and equals a fresh
    copy of itself solved in a fresh cache, bit for bit.
    """
    from dataclasses import replace

    from photonics import circuit

    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(11)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    before = solve(mesh, state, 1551.0, params)
    for name in ("offset_top", "kappa1", "loss_db", "link_phase", "delay_ps"):
        getattr(params, name)[1] += 0.05  # in place: the same objects
        after = solve(mesh, state, 1551.0, params)
        circuit._CHIPS.clear()
        fresh = replace(params, **{f: getattr(params, f).copy() for f in ("offset_top", "kappa1", "loss_db",
                                                                          "link_phase", "delay_ps")})
        np.testing.assert_array_equal(after, solve(mesh, state, 1551.0, fresh))
        assert np.abs(after - before).max() > 1e-6, name
        before = after


def test_kept_chip_constants_stay_bounded(monkeypatch):
    """Only the last few chips' constants are kept (a campaign over many chips holds no more),
    and only as many bytes of them as the budget allows: a long sweep's constants (16 % of a
    1,000-wavelength smartlight solve) are kept, a sweep too long for the budget is not.
    """
    from photonics import circuit

    mesh = hexagonal(1, 2)
    state = MeshState.uniform(mesh, "bar")
    for seed in range(circuit._KEPT_CHIPS + 5):
        params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
        solve(mesh, state, [1550.0, 1551.0], params)
    assert len(circuit._CHIPS) == circuit._KEPT_CHIPS
    long = np.linspace(1530.0, 1565.0, 1000)
    solve(mesh, state, long, params)
    assert len(circuit._CHIPS) == circuit._KEPT_CHIPS  # kept, the oldest short one dropped
    assert list(circuit._CHIPS)[-1][1] == long.tobytes()
    monkeypatch.setattr(circuit, "_KEPT_BYTES", 4 * circuit._kept_size(params, 1000))
    too_long = np.linspace(1530.0, 1565.0, 3000)  # more than half the budget: computed, not kept
    before = list(circuit._CHIPS)
    solve(mesh, state, too_long, params)
    assert before == list(circuit._CHIPS)
    solve(mesh, state, long[:-1], params)  # kept: older entries leave until the bytes fit
    assert list(circuit._CHIPS)[-1][1] == long[:-1].tobytes()
    assert sum(e[2] for e in circuit._CHIPS.values()) <= circuit._KEPT_BYTES

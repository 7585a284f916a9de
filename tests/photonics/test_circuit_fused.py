"""The full solve as one compiled call per chunk (issue 28): heater phases to port matrices in
``solve_phases``, on a compact arena, with the bytes of the merges it replaced.
"""

import numpy as np
import pytest

from photonics import circuit, circuit_merge
from photonics.circuit import solve
from photonics.circuit_merge import merge_plan, new_arenas, remerge, root_matrix
from photonics.merge_layout import LANES, LEAF_SIZE
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight, square, triangular

MESHES = {"smartlight": smartlight, "hex66": lambda: hexagonal(6, 6), "square": lambda: square(3, 3),
          "tri": lambda: triangular(2, 4), "hex11": lambda: hexagonal(1, 1)}


@pytest.mark.parametrize("name", list(MESHES))
def test_the_compact_arena_never_overwrites_a_matrix_still_to_be_read(name):
    """The full solve places each merge's output in a compact arena, reusing the space of
    matrices already merged (circuit_merge._compact). No output may overlap the TBUs' matrices
    or any matrix not yet read by its parent (its own halves included), and it must be smaller
    than the plan's layout wherever there is space to reuse.
    """
    plan = merge_plan(MESHES[name]())
    leaves = LEAF_SIZE * plan.n_tbus
    live: dict[int, int] = {}  # offset -> entries of every merged matrix not yet read
    for row, full in zip(plan.solve_merges, plan.merges, strict=True):
        out, ne = int(row[0]), int(row[6] + row[7])
        assert (row[[2, 4, 5, 6, 7, 8]] == full[[2, 4, 5, 6, 7, 8]]).all()  # only offsets move
        assert out >= leaves
        assert out + ne * ne <= plan.solve_size
        for off, size in live.items():
            assert out + ne * ne <= off or off + size <= out, "an output overwrites a live matrix"
        for col, ports in ((1, 2), (3, 4)):
            if row[col] >= leaves:
                assert live.pop(int(row[col])) == row[ports] ** 2  # a half is read once, by its parent
            else:
                assert row[col] == full[col]  # a TBU stays at 16 * tbu
        live[out] = ne * ne
    assert list(live) == [int(plan.solve_merges[-1, 0])]  # only the root is left
    if plan.n_tbus >= 8:
        assert plan.solve_size < plan.size


@pytest.mark.parametrize("name", list(MESHES))
@pytest.mark.parametrize("n_wl", [1, 5])
def test_the_one_call_solve_gives_the_bytes_of_the_merges_in_the_plan_s_layout(name, n_wl):
    """Forward matrices, merges and output in one compiled call on the compact arena give exactly
    the bytes of the merges run on the plan's own layout (what the incremental solver keeps),
    for every input and for a subset.
    """
    mesh = MESHES[name]()
    rng = np.random.default_rng([n_wl, len(name)])
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    wl = np.linspace(1535.0, 1562.0, n_wl)
    plan = merge_plan(mesh)
    arenas = new_arenas(plan, n_wl)
    T = circuit.tbu_transfers(params, state, wl)[0].reshape(n_wl, mesh.n_tbus, 4)
    t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
    remerge(plan, arenas, T, np.arange(mesh.n_tbus), t_link)
    every = np.arange(mesh.n_ports)
    assert solve(mesh, state, wl, params)[0].tobytes() == root_matrix(plan, arenas, every).tobytes()
    some = np.array([3, 0, mesh.n_ports - 1])
    assert (solve(mesh, state, wl, params, inputs=some)[0].tobytes()
            == root_matrix(plan, arenas, some).tobytes())


@pytest.mark.parametrize("n_wl", [1, 6])
def test_a_solve_is_one_compiled_call_per_chunk(monkeypatch, n_wl):
    """At one wavelength the Python and the foreign calls around the arithmetic were most of a
    solve (issue 28): the heater phases go to the port matrices in one compiled call, with no
    separate transfer-matrix or merge kernel call.
    """
    calls: list[tuple[str, int]] = []
    kernel = circuit_merge._kernel

    def spy(name, lanes):
        calls.append((name, lanes))
        return kernel(name, lanes)

    monkeypatch.setattr(circuit_merge, "_kernel", spy)
    monkeypatch.setattr(circuit, "_transfer_kernel", lambda: pytest.fail("a separate transfer-matrix call"))
    mesh = smartlight()
    state = MeshState.random(mesh, np.random.default_rng(3))
    solve(mesh, state, np.linspace(1540.0, 1560.0, n_wl))
    assert calls == [("solve_phases", 1 if n_wl == 1 else LANES)]


@pytest.mark.parametrize(("n_wl", "bad"), [(1, 0), (7, 5), (7, 1)])
def test_a_non_finite_block_anywhere_sends_the_batch_to_sparse_lu(monkeypatch, n_wl, bad):
    """The compiled call reports whether every entry it wrote is finite (it replaced a numpy pass
    over the output): a non-finite block anywhere (here the wavelength at index ``bad`` of 7 in
    each of three states, 21 blocks in 8-lane groups of which the last holds 5: index 5 is lanes
    5 and 4 of the full groups, each group's second quad, and lane 3 of the last; index 1 lanes
    1 and 0, the first quads, and 7; or the one block of the one-lane build) sends the solve to
    sparse LU, and finite ones do not.
    """
    mesh = hexagonal(2, 2)
    state = MeshState.random(mesh, np.random.default_rng(9), n_states=3)
    sparse: list[int] = []

    def spy(plan, T, inputs, out):
        sparse.append(len(T))  # (SuperLU itself would refuse the NaN system)
        out[:] = 0.0

    monkeypatch.setattr(circuit, "_solve_blocks", spy)
    wl = np.linspace(1545.0, 1555.0, n_wl)
    solve(mesh, state, wl)
    assert not sparse
    wl[bad] = np.nan
    solve(mesh, state, wl)
    assert sum(sparse) == 3 * n_wl

"""A unitary on a square or triangular mesh: Clements decomposition, lattice embedding,
gradient refinement.

The analytic start sets every lattice block's split from the Clements decomposition
(:mod:`photonics.synthesis.clements`) on the lattice of
:mod:`photonics.synthesis.square_lattice` or :mod:`photonics.synthesis.triangular_lattice`,
every waveguide TBU to the state that carries its
path and every other TBU to the park state; the splits are the hard, non-convex part of the
problem. The refinement then moves every heater of the lattice (blocks, pass-throughs and
waveguides, whose common phases are the lattice's phase screens) to maximise the fidelity
on the chip model at every wavelength asked, which absorbs the propagation phases, the
coupler errors and the losses the model knows.
"""

from __future__ import annotations

import numpy as np

from photonics.circuit import solve
from photonics.configuration import Configuration, hop_state
from photonics.errors import StateError
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.synthesis.clements import check_unitary, decompose, lattice_columns
from photonics.synthesis.objectives import infidelity
from photonics.synthesis.refine import Refined, refine
from photonics.synthesis.square_lattice import Lattice, square_lattice
from photonics.synthesis.triangular_lattice import triangular_lattice
from photonics.topology import Mesh

LATTICES = {"square": square_lattice, "triangular": triangular_lattice}  # meshes that hold a Clements lattice


def lattice(mesh: Mesh, n: int) -> Lattice:
    """The ``n``-mode Clements lattice of a square or triangular mesh, or :class:`StateError`
    saying which meshes hold one (a hexagonal vertex joins three TBUs: light turns by 60
    degrees and no brick wall of 2x2 blocks closes).
    """
    build = LATTICES.get(mesh.kind)
    if build is None:
        raise StateError(f"a unitary is laid out on a square mesh (square:RxC, N <= R and N <= C) or a "
                         f"triangular one (triangular:RxC, N <= R and N <= C - 1); this mesh is {mesh.kind}")
    return build(mesh, n)


def start_fractions(mesh: Mesh, lat: Lattice, u: np.ndarray) -> np.ndarray:
    """Cross fraction of every TBU for the analytic start (park state off the lattice)."""
    r = Configuration.parked(mesh).cross_fraction.copy()
    for t, (entry, exit_) in lat.fixed.items():
        r[t] = 1.0 if hop_state(entry, exit_) == "cross" else 0.0
    theta = dict.fromkeys(lat.blocks, 0.0)  # columns past the decomposition pass modes on
    blocks, _ = decompose(u)
    for blk, col in zip(blocks, lattice_columns(blocks, len(u)), strict=True):
        theta[(col, blk.m)] = blk.theta
    for key, th in theta.items():
        t = lat.blocks[key][0]
        stay = np.cos(th) ** 2  # mode m's power that stays on m
        r[t] = 1 - stay if lat.stays_fraction_is_bar(key) else stay
    return r


NO_COMMON_PHASE = "no common phase"  # a map's TBU whose common phase light could not tell (a NaN in
# its ``common``): its split is known, so the lattice may use it where its common phase is a port phase


def port_phase_tbus(mesh: Mesh, lat: Lattice) -> set[int]:
    """The lattice's TBUs between a mode's mesh port and its first block, or its last block and
    its output port: each carries that one mode alone, so its common phase is a phase of the
    port, which a fidelity up to port phases (and the fibres outside the mesh) absorb.
    """
    peer = mesh.peer()
    found: set[int] = set()
    for ports, forward in ((lat.inputs, True), (lat.outputs, False)):
        for n in ports:
            g = int(mesh.port_tbu_ports[n])
            while g >= 0 and g // 4 in lat.fixed:
                t, local = divmod(g, 4)
                entry, exit_ = lat.fixed[t] if forward else lat.fixed[t][::-1]
                if local != entry:
                    break
                found.add(t)
                g = int(peer[4 * t + exit_])
    return found


def check_failed(mesh: Mesh, lat: Lattice, failed: dict[int, str]) -> None:
    """Refuse a lattice that needs a TBU the calibration records as failed or unverified (a TBU
    with no common phase only where that phase is not a port phase).
    """
    edge = port_phase_tbus(mesh, lat) if NO_COMMON_PHASE in failed.values() else set()
    hit = sorted(t for t in set(failed) & set(lat.tbus.tolist())
                 if not (failed[t] == NO_COMMON_PHASE and t in edge))
    if hit:
        names = ", ".join(f"{mesh.tbu_names[t]} ({failed[t]})" for t in hit[:5])
        raise StateError(f"the {lat.n}-mode lattice needs TBU(s) the calibration map records as failed, "
                         f"unverified or without a common phase ({names}{', ...' if len(hit) > 5 else ''}); "
                         "a unitary on this chip needs them all: recalibrate or repair, or synthesise a "
                         "smaller unitary")


def synthesize_unitary(mesh: Mesh, target: np.ndarray, params: TBUParams, wavelengths_nm: np.ndarray,
                       failed: dict[int, str] | None = None,
                       max_steps: int | None = None) -> tuple[Lattice, MeshState, MeshState, Refined]:
    """The lattice, the analytic start, and the refined state for the unitary ``target``."""
    u = check_unitary(target)
    lat = lattice(mesh, len(u))
    check_failed(mesh, lat, failed or {})
    start = Configuration(start_fractions(mesh, lat, u), mesh=mesh).heater_state(params.offset_top,
                                                                                   params.offset_bot)
    ins, outs = np.array(lat.inputs), np.array(lat.outputs)
    wl = np.asarray(wavelengths_nm, float)
    v0 = solve(mesh, start, wl, params, inputs=ins)[0][:, outs]
    reach = float((np.abs(v0) ** 2).sum(axis=(-2, -1)).mean() / len(u))
    kw = {} if max_steps is None else {"max_steps": max_steps}
    refined = refine(mesh, params, start, lat.tbus, infidelity(u, reach), wl, ins, outs, **kw)
    return lat, start, refined.state, refined

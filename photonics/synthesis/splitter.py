"""Power targets: a 1-to-N splitter with given ratios, and a tunable 2x2 coupler.

Both are paths whose TBUs are set to bar or cross except where light parts or meets. The
analytic start: for the splitter the multicast tree of
:func:`photonics.routing.multicast.route_tree` (equal shares at nominal losses), for the
coupler the 2-mode lattice of a square mesh with its first block at the asked ratio. The
refinement then moves every heater on the paths to meet the shares on the chip model at
every wavelength asked (its couplers, losses and leaks), with a small weight on the power
lost. Only differential phases matter for powers through these paths, so the result is a
configuration `lumion program` sets exactly, through any calibration map.
"""

from __future__ import annotations

import numpy as np

from photonics.configuration import Configuration, Route
from photonics.errors import StateError
from photonics.physics import TBUParams
from photonics.routing.graph import build_graph
from photonics.routing.multicast import route_tree, trees_configuration
from photonics.state import MeshState
from photonics.synthesis.objectives import power_mismatch
from photonics.synthesis.refine import Refined, refine
from photonics.synthesis.result import fractions_of
from photonics.synthesis.square_lattice import Lattice, square_lattice
from photonics.synthesis.unitary import check_failed, start_fractions
from photonics.synthesis.walks import CouplerLayout, coupler_layout
from photonics.topology import Mesh

SNAP = 1e-6  # a refined bar or cross this close to 0 or 1 is written as bar or cross: 1e-6 of the
# power is -60 dB, below the meter's floor and far below a map's residual (~0.02 rad = 1e-4)
LOSS_WEIGHT = 1e-3  # weight of the lost power against the squared share error: small enough
# that shares are met to ~1e-4 first, large enough to pick the least lossy of the states that meet them


def check_ratios(ratios: np.ndarray) -> np.ndarray:
    """Shares summing to 1 from non-negative ratios (any scale)."""
    r = np.asarray(ratios, dtype=float)
    if r.ndim != 1 or len(r) < 1 or not np.isfinite(r).all() or (r < 0).any() or r.sum() <= 0:
        raise StateError("split ratios must be non-negative numbers, at least one above 0 (e.g. 1,2,1)")
    return r / r.sum()


def _refined_configuration(mesh: Mesh, params: TBUParams, start: Configuration, refined: Refined,
                           tbus: np.ndarray, routes: tuple[Route, ...], meta: dict) -> Configuration:
    r = start.cross_fraction.copy()
    r[tbus] = fractions_of(refined.state, params)[tbus]
    whole = np.abs(r - np.round(r)) < SNAP
    r[whole] = np.round(r[whole])
    return Configuration(r, routes, meta, mesh=mesh)


def synthesize_split(mesh: Mesh, src: int, dsts: list[int], shares: np.ndarray, params: TBUParams,
                     wavelengths_nm: np.ndarray, failed: dict[int, str]
                     ) -> tuple[MeshState, Refined, Configuration, np.ndarray]:
    """Start state, refined result, configuration and the tree's TBUs of a 1-to-N splitter."""
    graph = build_graph(mesh, params, failed=failed)
    tree = route_tree(graph, src, dsts, params, blocked=frozenset(failed))
    conf0 = trees_configuration(mesh, [tree])
    start = conf0.heater_state(params.offset_top, params.offset_bot)
    tbus = np.array(sorted(tree.tbus), dtype=np.int64)
    target = shares[:, None]
    refined = refine(mesh, params, start, tbus, power_mismatch(target, LOSS_WEIGHT), wavelengths_nm,
                     np.array([src]), np.array(dsts))
    conf = _refined_configuration(mesh, params, conf0, refined, tbus, tree.branches,
                                  {"synthesized": "splitter"})
    return start, refined, conf, tbus


def synthesize_walk_coupler(mesh: Mesh, kappa: float, params: TBUParams, wavelengths_nm: np.ndarray,
                            failed: dict[int, str]
                            ) -> tuple[MeshState, Refined, Configuration, np.ndarray, CouplerLayout]:
    """A 2x2 coupler on any mesh (hex, smartlight, triangular): one TBU at ``kappa`` whose
    four ports are walked out to four mesh ports (:func:`photonics.synthesis.walks.
    coupler_layout`), every TBU on the walks in its bar or cross state; then the coupler's and
    the walks' heaters refined to the shares at every wavelength, as for the splitter. Light
    meets only at the coupler, so only differential phases matter: a configuration holds it.
    """
    _check_kappa(kappa)
    lay = coupler_layout(mesh, failed)
    r = Configuration.parked(mesh).cross_fraction.copy()
    for arm in lay.arms:
        r[[h.tbu for h in arm]] = [float(h.arc) for h in arm]
    r[lay.tbu] = kappa
    conf0 = Configuration(r, (), {"synthesized": "coupler"}, mesh=mesh)
    start = conf0.heater_state(params.offset_top, params.offset_bot)
    target = np.array([[1 - kappa, kappa], [kappa, 1 - kappa]])
    tbus = lay.tbus
    refined = refine(mesh, params, start, tbus, power_mismatch(target, LOSS_WEIGHT), wavelengths_nm,
                     np.array(lay.inputs), np.array(lay.outputs))
    conf = _refined_configuration(mesh, params, conf0, refined, tbus, (), {"synthesized": "coupler"})
    return start, refined, conf, tbus, lay


def _check_kappa(kappa: float) -> None:
    if not 0 <= kappa <= 1:
        raise StateError(f"the coupling must lie in [0, 1] (0: each input straight on), not {kappa}")


def synthesize_coupler(mesh: Mesh, kappa: float, params: TBUParams, wavelengths_nm: np.ndarray,
                       failed: dict[int, str]
                       ) -> tuple[MeshState, Refined, Configuration, np.ndarray, Lattice]:
    """A 2x2 coupler on a square mesh: ``kappa`` of each input's power crosses to the other
    output. Laid out as the 2-mode lattice (:mod:`photonics.synthesis.square_lattice`) with
    its first block at ``kappa`` and every later block passing each mode on (no interference
    between blocks, so only differential phases matter and a configuration holds it).
    """
    _check_kappa(kappa)
    lat = square_lattice(mesh, 2)
    check_failed(mesh, lat, failed)
    u = np.array([[np.sqrt(1 - kappa), 1j * np.sqrt(kappa)], [1j * np.sqrt(kappa), np.sqrt(1 - kappa)]])
    conf0 = Configuration(start_fractions(mesh, lat, u), (), {"synthesized": "coupler"}, mesh=mesh)
    start = conf0.heater_state(params.offset_top, params.offset_bot)
    target = np.abs(u) ** 2
    ins, outs = np.array(lat.inputs), np.array(lat.outputs)
    refined = refine(mesh, params, start, lat.tbus, power_mismatch(target, LOSS_WEIGHT), wavelengths_nm,
                     ins, outs)
    conf = _refined_configuration(mesh, params, conf0, refined, lat.tbus, (), {"synthesized": "coupler"})
    return start, refined, conf, lat.tbus, lat

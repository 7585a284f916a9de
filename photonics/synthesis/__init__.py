"""Any linear function on the chip: a unitary, a power splitter or a tunable coupler as a
mesh state, refined on the chip model with the exact gradient of the circuit solve.

* :func:`unitary` -- an N x N unitary on a square or triangular mesh: Clements
  decomposition laid out as a lattice in the mesh (:mod:`.square_lattice`,
  :mod:`.triangular_lattice`), then gradient refinement of every lattice heater
  (:mod:`.unitary`);
* :func:`splitter` -- one input to N outputs with given power ratios (:mod:`.splitter`);
* :func:`coupler` -- a 2x2 coupler with a given coupling (a square mesh's 2-mode lattice, or
  one TBU walked out to four mesh ports on any other mesh);
* :func:`ring_filter` -- a notch filter with a given centre and bandwidth: a loop of TBUs
  (a hexagonal cell on a hex mesh) beside a bus (:mod:`.ring`);
* :func:`mz_filter` -- a Mach-Zehnder band-pass filter with a given centre and one of the
  bandwidths the mesh's arm length differences allow: two arms of unequal length between
  two tunable couplers (:mod:`.mzi`).

Each returns a :class:`~photonics.synthesis.result.Synthesis` with its report at every
wavelength asked (:mod:`.report`). The chip model (:func:`chip_model`) is the nominal chip
with each TBU's differential passive phase from a calibration map when one is given;
TBUs the map records as failed or unverified are avoided (the unitary's lattice needs all
of its TBUs and is refused instead).

Example:
    >>> import numpy as np
    >>> from photonics.topology import square
    >>> s = splitter(square(3, 3), 0, [10, 14], [1, 3], wavelengths_nm=[1550.0])
    >>> [round(x[0], 3) for x in s.achieved[0]["shares"]]
    [0.25, 0.75]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from photonics.configuration import Configuration
from photonics.errors import StateError
from photonics.physics import TBUParams, nominal_params
from photonics.state import MeshState
from photonics.synthesis import mzi
from photonics.synthesis.refine import Refined
from photonics.synthesis.report import power_report, unitary_report
from photonics.synthesis.result import PHASE_ONLY, Synthesis
from photonics.synthesis.ring import COMMON_PHASE, fsr_nm, notch, sweep, synthesize_ring, through_power
from photonics.synthesis.splitter import (
    check_ratios,
    synthesize_coupler,
    synthesize_split,
    synthesize_walk_coupler,
)
from photonics.synthesis.unitary import synthesize_unitary
from photonics.topology import Mesh

__all__ = ["Synthesis", "chip_model", "coupler", "mz_filter", "ring_filter", "splitter", "unitary"]


def chip_model(mesh: Mesh, delta_rad: np.ndarray | None = None,
               common_rad: np.ndarray | None = None) -> TBUParams:
    """The chip the synthesis trusts: nominal, with each TBU's differential passive phase
    ``delta_rad`` (a calibration map's ``delta``) when given, and its common phase
    ``common_rad`` (a phase-calibrated map's ``common``; NaN and None count as 0) so that the
    arms sit at ``common +- delta / 2``. Without common phases the model is power-only: its
    splits are right, the phases where paths meet are not.
    """
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    if delta_rad is None:
        return params
    delta = np.asarray(delta_rad, dtype=float)
    if delta.shape != (mesh.n_tbus,):
        raise StateError(f"the map has {delta.size} TBUs, the mesh {mesh.n_tbus}")
    if common_rad is None:
        return replace(params, offset_top=delta.copy(), offset_bot=np.zeros(mesh.n_tbus))
    common = np.nan_to_num(np.asarray(common_rad, dtype=float), nan=0.0)
    if common.shape != delta.shape:
        raise StateError(f"the map has {common.size} common phases, the mesh {mesh.n_tbus} TBUs")
    return replace(params, offset_top=common + delta / 2, offset_bot=common - delta / 2)


def _wl(wavelengths_nm: Sequence[float] | np.ndarray) -> np.ndarray:
    wl = np.atleast_1d(np.asarray(wavelengths_nm, dtype=float))
    if wl.ndim != 1 or not len(wl) or not np.isfinite(wl).all() or (wl <= 0).any():
        raise StateError("wavelengths must be positive numbers (nm)")
    return wl


def unitary(mesh: Mesh, target: np.ndarray, params: TBUParams | None = None,
            wavelengths_nm: Sequence[float] | np.ndarray = (1550.0,), failed: dict[int, str] | None = None,
            max_steps: int | None = None) -> Synthesis:
    """The unitary ``target`` (N x N) on a square mesh of at least N x N cells or a triangular
    mesh of at least N rows of N + 1 triangles.
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    wl = _wl(wavelengths_nm)
    lat, start, state, refined = synthesize_unitary(mesh, target, params, wl, failed, max_steps)
    u = np.asarray(target, dtype=complex)
    ins, outs = np.array(lat.inputs), np.array(lat.outputs)
    return Synthesis("unitary", mesh, u, lat.inputs, lat.outputs, state, None,
                     unitary_report(mesh, params, start, u, wl, ins, outs),
                     unitary_report(mesh, params, state, u, wl, ins, outs), tuple(lat.tbus.tolist()),
                     refined.steps, refined.evaluations, PHASE_ONLY, params=params)


def splitter(mesh: Mesh, src: int, dsts: Sequence[int], ratios: Sequence[float],
             params: TBUParams | None = None,
             wavelengths_nm: Sequence[float] | np.ndarray = (1550.0,),
             failed: dict[int, str] | None = None) -> Synthesis:
    """One input ``src`` to the ports ``dsts`` with power ``ratios`` (any scale)."""
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    wl = _wl(wavelengths_nm)
    shares = check_ratios(np.asarray(ratios, dtype=float))
    if len(shares) != len(dsts):
        raise StateError(f"{len(dsts)} outputs but {len(shares)} ratios: give one ratio per output")
    start, refined, conf, tbus = synthesize_split(mesh, int(src), [int(d) for d in dsts], shares, params, wl,
                                                  failed or {})
    return _power_result("splitter", mesh, params, wl, shares[:, None], (int(src),),
                         tuple(int(d) for d in dsts), start, refined, conf, tbus)


def coupler(mesh: Mesh, kappa: float, params: TBUParams | None = None,
            wavelengths_nm: Sequence[float] | np.ndarray = (1550.0,),
            failed: dict[int, str] | None = None) -> Synthesis:
    """A 2x2 coupler: ``kappa`` of each input's power goes to the other output, ``1 - kappa``
    straight on. On a square mesh the 2-mode lattice (inputs on the west edge, outputs on the
    east); on any other mesh one TBU with its four ports walked out to mesh ports.
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    wl = _wl(wavelengths_nm)
    build = synthesize_coupler if mesh.kind == "square" else synthesize_walk_coupler
    start, refined, conf, tbus, lat = build(mesh, float(kappa), params, wl, failed or {})
    target = np.array([[1 - kappa, kappa], [kappa, 1 - kappa]])
    return _power_result("coupler", mesh, params, wl, target, tuple(lat.inputs), tuple(lat.outputs), start,
                         refined, conf, tbus)


def ring_filter(mesh: Mesh, centre_nm: float, bandwidth_nm: float, params: TBUParams | None = None,
                failed: dict[int, str] | None = None) -> Synthesis:
    """A notch at ``centre_nm`` with full width at half depth ``bandwidth_nm`` on the bus
    past the mesh's shortest loop; the report (start and achieved) measures one free
    spectral range around the centre.
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    lay, start, state, refined = synthesize_ring(mesh, float(centre_nm), float(bandwidth_nm), params, failed)
    fsr = fsr_nm(params, lay, float(centre_nm))
    wl = sweep(float(centre_nm), fsr)
    reports = [{"wavelength_nm": float(centre_nm), **notch(wl, through_power(mesh, params, s, lay, wl)[0])}
               for s in (start, state)]
    tbus = tuple(int(t) for t in lay.loop_tbus) + tuple(h.tbu for h in lay.bus)
    extra = {"filter": {"centre_nm": float(centre_nm), "bandwidth_nm": float(bandwidth_nm), "fsr_nm": fsr,
                        "coupler": mesh.tbu_names[lay.coupler],
                        "loop": [mesh.tbu_names[int(t)] for t in lay.loop_tbus]}}
    return Synthesis("filter", mesh, np.array([float(centre_nm), float(bandwidth_nm)]), (lay.input_port,),
                     (lay.output_port,), state, None, [reports[0]], [reports[1]], tbus, refined.steps,
                     refined.evaluations, COMMON_PHASE, extra, params=params)


def mz_filter(mesh: Mesh, centre_nm: float, bandwidth_nm: float, params: TBUParams | None = None,
              failed: dict[int, str] | None = None) -> Synthesis:
    """A passband at ``centre_nm`` with full width at half depth ``bandwidth_nm`` (one of the
    widths :func:`photonics.synthesis.mzi.reachable` lists, within
    :data:`photonics.synthesis.mzi.BANDWIDTH_TOL`; any other is refused naming them) from the
    input to the first output; the second output carries the complement. The report (start
    and achieved) measures the first output over one free spectral range around the centre.
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    centre = float(centre_nm)
    lay, start, state, refined = mzi.synthesize_mzi(mesh, centre, float(bandwidth_nm), params, failed)
    fsr = mzi.fsr_nm(params, lay, centre)
    wl = mzi.sweep(centre, fsr)
    passes = [mzi.outputs_power(mesh, params, s, lay, wl)[:, 0] for s in (start, state)]
    reports = [{"wavelength_nm": centre, **mzi.passband(wl, p)} for p in passes]
    names = mesh.tbu_names
    extra = {"filter": {"centre_nm": float(centre_nm), "bandwidth_nm": float(bandwidth_nm), "fsr_nm": fsr,
                        "arm_difference_tbus": lay.difference, "splitter": names[lay.splitter],
                        "combiner": names[lay.combiner],
                        "arms": [[names[h.tbu] for h in arm] for arm in lay.arms]}}
    return Synthesis("mz_filter", mesh, np.array([float(centre_nm), float(bandwidth_nm)]), (lay.input_port,),
                     lay.output_ports, state, None, [reports[0]], [reports[1]], tuple(lay.tbus.tolist()),
                     refined.steps, refined.evaluations, mzi.ARMS_PHASE, extra, params=params)


def _power_result(kind: str, mesh: Mesh, params: TBUParams, wl: np.ndarray, target: np.ndarray,
                  ins: tuple[int, ...], outs: tuple[int, ...], start: MeshState,
                  refined: Refined, conf: Configuration,
                  tbus: np.ndarray) -> Synthesis:
    i, o = np.array(ins), np.array(outs)
    return Synthesis(kind, mesh, target, ins, outs, refined.state, conf,
                     power_report(mesh, params, start, target, wl, i, o),
                     power_report(mesh, params, refined.state, target, wl, i, o), tuple(tbus.tolist()),
                     refined.steps, refined.evaluations, params=params)

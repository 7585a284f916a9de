"""What light should show once a synthesised heater state is programmed: the synthesis's own
prediction, written into the state file so ``lumion program`` can check the chip against it.

A heater state (``lumion.state``) holds phases only; nothing in it says what the chip should
then do. ``lumion synthesize --out`` therefore adds a ``prediction`` object: the mesh it was
made for (label and fingerprint), the chip model it was refined on, the TBUs the target uses,
the ports light enters by, the wavelengths to check at (:func:`check_wavelengths`), and at each
the power ``|V_pq|^2`` the model predicts at every mesh port ``p`` for unit power into each
input ``q`` (a fraction of the input's power)::

    {"schema": "lumion.state", "version": 1, "tbus": {...},
     "prediction": {"kind": "unitary", "chip": "calibration map m.json (...)",
                    "mesh": "square:3x3", "mesh_fingerprint": "...",
                    "tbus": ["tbu:0.0.1", ...], "inputs": ["port:2", ...],
                    "outputs": ["port:9", ...], "wavelengths_nm": [1550.0],
                    "powers": [[[...one row per mesh port, one column per input...]]]}}

Readers of version 1 that do not know ``prediction`` ignore it (``MeshState.from_dict``).
The prediction is the synthesis's, not the programming map's: a state synthesised for another
chip, or edited afterwards, is caught when light disagrees with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from photonics.circuit import solve
from photonics.configuration import MeshMismatchError, describe_mesh, mesh_fingerprint, mesh_label
from photonics.errors import StateError
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.synthesis.result import Synthesis
from photonics.topology import Mesh

KEY = "prediction"
# A prediction holds at most this many inputs: a unitary has at most 32 modes
# (lab_scripts.cmd_synthesize.MAX_UNITARY); a file asking more is not one synthesize wrote.
MAX_INPUTS = 64
MAX_WAVELENGTHS = 3  # check_wavelengths gives at most three: each is a laser retune per input
# A filter is checked at its centre and at this many bandwidths either side of it (its slope,
# where a passband or notch that moved shows). A Mach-Zehnder passband at its half-width
# points, where it is steepest (slope pi / (2 bandwidth) of the peak): the 0.93 pm centre error
# a phase-calibrated map leaves on 89 pm (docs/synthesis.md) moves them by ~0.01 of the input's
# power, a tenth of the width by ~0.09. A ring notch one bandwidth out, where it is a third as
# steep as at half depth: at the half-width points the centre error a calibrated map leaves (up
# to 2 pm on a 35 pm notch) moved the through power by 0.039 on chip 4360, next to
# instruments.state_check.STATE_TOL (0.05); one bandwidth out by 0.020
# (benchmarks/bench_program_state.py).
CHECK_OFFSETS_BANDWIDTHS = {"mz_filter": 0.5, "filter": 1.0}


@dataclass(frozen=True, eq=False)
class Prediction:
    """The powers a synthesised state should give, on the model it was refined on.

    Attributes:
        kind: the synthesis's kind (unitary, splitter, coupler, filter, mz_filter).
        chip: the chip model it was refined on, as ``lumion synthesize`` names it.
        tbus: indices of the TBUs the target uses (the rest are parked).
        inputs: mesh ports light enters by; outputs: the target's output ports.
        wavelengths_nm: where the powers hold (nm).
        powers: (n_wavelengths, n_ports, n_inputs) power at every mesh port per unit power
            into each input.
    """

    kind: str
    chip: str
    tbus: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    wavelengths_nm: tuple[float, ...]
    powers: np.ndarray

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form (the ``prediction`` object of a state file)."""
        return {"kind": self.kind, "chip": self.chip, "mesh": mesh_label(mesh),
                "mesh_fingerprint": mesh_fingerprint(mesh),
                "tbus": [mesh.tbu_names[t] for t in self.tbus],
                "inputs": [mesh.port_names[p] for p in self.inputs],
                "outputs": [mesh.port_names[p] for p in self.outputs],
                "wavelengths_nm": list(self.wavelengths_nm),
                "powers": [[[round(float(x), 9) for x in row] for row in at] for at in self.powers]}

    @classmethod
    def from_dict(cls, data: Any, mesh: Mesh, source: str = "state") -> Prediction:
        """Parse :meth:`to_dict` output for ``mesh``; a prediction made for another mesh
        raises :class:`~photonics.configuration.MeshMismatchError` before anything else is read.
        """
        if not isinstance(data, dict):
            raise StateError(f"{source}: '{KEY}' must be an object (what `lumion synthesize --out` writes)")
        check_mesh(data, mesh, source)
        try:
            tbus = tuple(mesh.tbu_index(str(t)) for t in data["tbus"])
            inputs = tuple(mesh.port_index(str(p)) for p in data["inputs"])
            outputs = tuple(mesh.port_index(str(p)) for p in data["outputs"])
            wl = tuple(float(x) for x in data["wavelengths_nm"])
            powers = np.asarray(data["powers"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"{source}: '{KEY}' needs tbus, inputs, outputs, wavelengths_nm and powers "
                             f"(what `lumion synthesize --out` writes): {exc}"[:300]) from exc
        if not 0 < len(inputs) <= MAX_INPUTS or len(set(inputs)) != len(inputs):
            raise StateError(f"{source}: '{KEY}' inputs must name 1..{MAX_INPUTS} distinct ports")
        if not 0 < len(wl) <= MAX_WAVELENGTHS or not all(np.isfinite(x) and x > 0 for x in wl):
            raise StateError(f"{source}: '{KEY}' wavelengths_nm must list 1..{MAX_WAVELENGTHS} positive "
                             "numbers (nm)")
        shape = (len(wl), mesh.n_ports, len(inputs))
        if powers.shape != shape or not np.isfinite(powers).all() or (powers < 0).any():
            raise StateError(f"{source}: '{KEY}' powers must be, per wavelength, {mesh.n_ports} rows (one "
                             f"per mesh port) of {len(inputs)} non-negative numbers (one per input)")
        return cls(str(data.get("kind", "")), str(data.get("chip", "")), tbus, inputs, outputs, wl, powers)


def check_mesh(data: dict[str, Any], mesh: Mesh, source: str) -> None:
    """Raise :class:`MeshMismatchError` when ``data`` (a prediction) was made for another mesh."""
    label, fingerprint = data.get("mesh"), data.get("mesh_fingerprint")
    if not (isinstance(label, str) and isinstance(fingerprint, str)):
        raise StateError(f"{source}: '{KEY}' names its mesh in 'mesh' and 'mesh_fingerprint' (strings)")
    if fingerprint != mesh_fingerprint(mesh):
        here = describe_mesh(mesh_label(mesh), mesh_fingerprint(mesh), mesh.n_tbus)
        made_for = describe_mesh(label[:60], fingerprint[:40])
        raise MeshMismatchError(f"{source} was synthesized for mesh {made_for} and cannot be used on mesh "
                                f"{here}; synthesize it again for {mesh_label(mesh)}")


def predicted_powers(mesh: Mesh, state: MeshState, params: TBUParams | None, inputs: tuple[int, ...],
                     wavelengths_nm: Any) -> np.ndarray:
    """(n_wavelengths, n_ports, n_inputs) ``|Y[:, inputs]|^2`` of ``state`` on the chip ``params``."""
    y = solve(mesh, state, np.atleast_1d(np.asarray(wavelengths_nm, dtype=float)), params,
              inputs=list(inputs))[0]
    return np.abs(y) ** 2


def pi_error_changes(mesh: Mesh, state: MeshState, params: TBUParams | None, inputs: tuple[int, ...],
                     wavelengths_nm: Any, tbus: tuple[int, ...], metered: tuple[int, ...]) -> np.ndarray:
    """(len(tbus), 2): the largest change of a metered port's power (fraction of the input's
    power) that the top (column 0) and bottom (column 1) arm of each TBU off by pi makes on the
    chip ``params``, over every input lit and every wavelength (nm); the lit port itself is not
    read. What a check by light at these ports can see of such an error (its own noise aside).
    """
    if not tbus or not inputs:
        return np.zeros((len(tbus), 2))
    k = np.arange(len(tbus))
    top = np.repeat(state.phi_top[None, :], 1 + 2 * len(tbus), axis=0)
    bot = np.repeat(state.phi_bot[None, :], 1 + 2 * len(tbus), axis=0)
    top[1 + 2 * k, list(tbus)] += np.pi  # row 0: the state itself; then top, bottom per TBU
    bot[2 + 2 * k, list(tbus)] += np.pi
    powers = np.abs(solve(mesh, MeshState(top, bot), np.atleast_1d(np.asarray(wavelengths_nm, dtype=float)),
                          params, inputs=list(inputs))) ** 2  # (states, wavelengths, ports, inputs)
    read = np.zeros(powers.shape[2:], dtype=bool)
    read[list(metered), :] = True
    read[list(inputs), np.arange(len(inputs))] = False
    change = np.where(read, np.abs(powers[1:] - powers[0]), 0.0).max(axis=(1, 2, 3))
    return change.reshape(len(tbus), 2)


def check_wavelengths(result: Synthesis, wavelengths_nm: Any) -> tuple[float, ...]:
    """Where (nm) a synthesis is checked by light. A filter: its asked centre and a point each
    side on its slope (:data:`CHECK_OFFSETS_BANDWIDTHS`), where a passband or notch that moved
    shows. Anything else: the first, middle and last of the wavelengths it was refined at
    (1550 nm alone by default).
    """
    if result.kind in CHECK_OFFSETS_BANDWIDTHS:
        f = result.extra["filter"]
        c, d = float(f["centre_nm"]), CHECK_OFFSETS_BANDWIDTHS[result.kind] * float(f["bandwidth_nm"])
        return (c - d, c, c + d)
    wl = np.sort(np.atleast_1d(np.asarray(wavelengths_nm, dtype=float)))
    return tuple(sorted({float(wl[0]), float(wl[len(wl) // 2]), float(wl[-1])}))


def prediction_of(result: Synthesis, chip: str, wavelengths_nm: Any) -> Prediction:
    """The prediction of ``result`` on the model it was refined on (``result.params``)."""
    wl = check_wavelengths(result, wavelengths_nm)
    powers = predicted_powers(result.mesh, result.state, result.params, tuple(result.inputs), wl)
    return Prediction(result.kind, chip, tuple(int(t) for t in result.tbus), tuple(result.inputs),
                      tuple(result.outputs), wl, powers)


def state_document(result: Synthesis, chip: str, wavelengths_nm: Any) -> dict[str, Any]:
    """The ``lumion.state`` file ``lumion synthesize --out`` writes: the heater state and its prediction."""
    return {**result.state.to_dict(result.mesh),
            KEY: prediction_of(result, chip, wavelengths_nm).to_dict(result.mesh)}

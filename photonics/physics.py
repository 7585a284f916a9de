"""TBU physics: defaults with sources, per-TBU parameters, and the MZI transfer matrix.

A TBU is a balanced Mach-Zehnder: coupler (kappa1) -> two arms -> coupler (kappa2).
Conventions (same in the circuit solve, the SAX cross-check and the layout):

* A coupler with power cross-coupling ``kappa`` is ``[[t, j k], [j k, t]]`` with
  ``t = sqrt(1 - kappa)``, ``k = sqrt(kappa)``; ``kappa = 0.5 + delta``.
* An arm with phase ``phi`` multiplies the field by ``exp(+j phi)``.
* The forward matrix ``T`` maps fields entering end ``a`` (a0, a1) to fields leaving end
  ``b`` (b0, b1); light entering at ``b`` sees ``T.T`` (reciprocity).
* With ideal couplers, equal arm phases give **cross** (a0 -> b1) and a differential
  phase of pi gives **bar** (a0 -> b0).
* Insertion loss is a common factor: it applies in bar, cross and every split alike.
* Wavelength: heater phases are given at the chip's reference wavelength ``lambda0``
  (1550 nm) and scale as ``lambda0 / lambda`` elsewhere (thermo-optic phase
  ``2 pi dn_eff L / lambda``); couplers split ``kappa(lambda) = kappa0 + s (lambda -
  lambda0)``. Both terms vanish at ``lambda0`` (and the slope ``s`` can be set to 0), so
  every result at the reference wavelength is unchanged.

Units: phases in rad, losses in dB (positive numbers are loss), lengths in um, delays in
ps, wavelengths in nm, electrical power in mW.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from photonics.errors import StateError

C_UM_PER_PS = 299.792458  # speed of light, um/ps

SOURCES = {
    "tbu_loss_db": "0.46-0.55 dB, SmartLight datasheet (Pérez-López et al., Nat. Commun. 15:1563, 2024)",
    "extinction_ratio_db": "32-44 dB, same source",
    "heater_power_pi_mw": "1.2-2.0 mW, same source (under-etched heaters)",
    "basic_unit_length_um": "811 um, same source",
    "basic_unit_delay_ps": "11.25 ps, same source",
    "fiber_to_chip_loss_db": "1.8-3.6 dB per facet, same source",
    "access_routing_loss_db": "5-8.4 dB, same source",
    "optical_crosstalk_db": "< -25 dB per TBU, same source",
    "polarization_extinction_db": "our choice: typical TE grating/edge coupler PER (20-30 dB)",
    "effective_index": "our choice: phase index of a silicon strip waveguide (the group index "
                       "4.16 implied by 811 um / 11.25 ps is silicon's, not silicon nitride's)",
    "center_wavelength_nm": "C-band centre; the reference wavelength of heater phases and couplers",
    "heater_phase_scaling": "thermo-optic phase 2 pi (dn_eff/dT) dT L / lambda: lambda0/lambda at a "
                            "fixed heater power; the dispersion of silicon's dn/dT is neglected "
                            "(about 1 % across the C band; Optics Express 27, 27229 (2019) measures "
                            "it from O to C band)",
    "coupler_slope_per_nm": "our estimate for a straight silicon 3 dB directional coupler: its "
                            "coupling length shrinks ~0.3 %/nm, so kappa rises ~0.0025/nm "
                            "(kappa 0.38 -> 0.62 over 1500-1600 nm); the strong wavelength "
                            "dependence of SOI directional couplers is why broadband designs exist "
                            "(Chen et al., Sci. Rep. 7, 7246 (2017)). Set it from the PDK.",
    "band_nm": "conventional C band, 1530-1565 nm (ITU-T G.Sup39 band table): the band the "
               "chip's couplers and port couplers are designed for",
}

C_BAND_NM: tuple[float, float] = (1530.0, 1565.0)
"""The conventional telecom C band (nm), ITU-T G.Sup39: the chip's operating band."""


@dataclass(frozen=True)
class PhysicsDefaults:
    """Nominal physics of a mesh chip; every number is configurable (see ``SOURCES``).

    Example:
        >>> d = PhysicsDefaults()
        >>> round(d.coupler_imbalance, 5)  # delta that bounds extinction at 35 dB
        0.00889
    """

    tbu_loss_db: float = 0.5
    extinction_ratio_db: float = 35.0
    heater_power_pi_mw: float = 1.3
    basic_unit_length_um: float = 811.0
    basic_unit_delay_ps: float = 11.25
    effective_index: float = 2.4
    center_wavelength_nm: float = 1550.0
    fiber_to_chip_loss_db: float = 2.5
    access_routing_loss_db: float = 6.0
    polarization_extinction_db: float = 25.0
    link_loss_db: float = 0.0
    arm_loss_imbalance_db: float = 0.0
    coupler_slope_per_nm: float = 0.0025
    band_nm: tuple[float, float] = C_BAND_NM

    @property
    def coupler_imbalance(self) -> float:
        """Coupler delta (kappa = 0.5 + delta) whose cross-state leakage equals the ER.

        With two equal couplers the cross state leaks ``(2 delta)**2`` into bar, so
        ``delta = 0.5 * 10**(-ER/20)``; an infinite ER means ideal 50:50 couplers.
        """
        if not np.isfinite(self.extinction_ratio_db):
            return 0.0
        return 0.5 * 10 ** (-self.extinction_ratio_db / 20)

    @property
    def group_index(self) -> float:
        """Group index implied by the basic unit length and delay."""
        return C_UM_PER_PS * self.basic_unit_delay_ps / self.basic_unit_length_um

    def lossless(self) -> PhysicsDefaults:
        """The same chip with every loss removed and ideal (flat 50:50) couplers."""
        return replace(self, tbu_loss_db=0.0, extinction_ratio_db=float("inf"),
                       link_loss_db=0.0, arm_loss_imbalance_db=0.0, coupler_slope_per_nm=0.0)


@dataclass(frozen=True, eq=False)
class TBUParams:
    """Per-TBU physical parameters (arrays of shape (n_tbus,)) and per-link loss/phase.

    Attributes:
        loss_db: insertion loss, dB (common to both arms, all states).
        kappa1, kappa2: power cross-coupling of the input/output couplers.
        arm_imbalance_db: extra loss of the bottom arm, dB.
        offset_top, offset_bot: passive phase of each arm at the centre wavelength, rad.
        delay_ps: group delay of the basic unit, ps.
        phase0: propagation phase of the basic unit at the centre wavelength, rad.
        link_loss_db, link_phase: per internal link (n_links,), dB and rad.
        center_wavelength_nm: reference wavelength ``lambda0`` (nm) at which ``phase0``,
            the offsets, the couplers' ``kappa`` and the heater phases are given.
        kappa_slope_per_nm: coupler wavelength slope ``d kappa / d lambda`` (1/nm), a
            scalar or per TBU; 0 makes the couplers flat across the band.
    """

    loss_db: np.ndarray
    kappa1: np.ndarray
    kappa2: np.ndarray
    arm_imbalance_db: np.ndarray
    offset_top: np.ndarray
    offset_bot: np.ndarray
    delay_ps: np.ndarray
    phase0: np.ndarray
    link_loss_db: np.ndarray
    link_phase: np.ndarray
    center_wavelength_nm: float = 1550.0
    kappa_slope_per_nm: np.ndarray | float = 0.0
    extra: dict = field(default_factory=dict, repr=False)

    @property
    def n_tbus(self) -> int:
        """Number of TBUs described."""
        return len(self.loss_db)


def nominal_params(n_tbus: int, n_links: int, defaults: PhysicsDefaults | None = None) -> TBUParams:
    """Identical TBUs with the nominal physics of ``defaults``.

    Example:
        >>> p = nominal_params(71, 122)
        >>> float(p.loss_db[0]), p.kappa1.shape
        (0.5, (71,))
    """
    d = defaults or PhysicsDefaults()
    ones = np.ones(n_tbus)
    phase0 = 2 * np.pi * d.effective_index * d.basic_unit_length_um / (d.center_wavelength_nm * 1e-3)
    return TBUParams(
        loss_db=d.tbu_loss_db * ones,
        kappa1=(0.5 + d.coupler_imbalance) * ones,
        kappa2=(0.5 + d.coupler_imbalance) * ones,
        arm_imbalance_db=d.arm_loss_imbalance_db * ones,
        offset_top=np.zeros(n_tbus),
        offset_bot=np.zeros(n_tbus),
        delay_ps=d.basic_unit_delay_ps * ones,
        phase0=np.mod(phase0, 2 * np.pi) * ones,
        link_loss_db=d.link_loss_db * np.ones(n_links),
        link_phase=np.zeros(n_links),
        center_wavelength_nm=d.center_wavelength_nm,
        kappa_slope_per_nm=d.coupler_slope_per_nm,
    )


def fabricated_params(
    n_tbus: int,
    n_links: int,
    rng: np.random.Generator,
    defaults: PhysicsDefaults | None = None,
    *,
    loss_spread_db: float = 0.03,
    kappa_spread: float = 0.003,
    arm_imbalance_spread_db: float = 0.02,
) -> TBUParams:
    """Nominal parameters plus fabrication-like random errors (seeded by ``rng``).

    Passive phase offsets are uniform in [0, 2 pi): an uncalibrated chip's arms are
    unknown. With the default spreads the losses stay within the datasheet's 0.46-0.55 dB
    band and the per-TBU extinction (set by the coupler error, ``(2 delta)^2``) within its
    32-44 dB band: kappa = 0.5 + 0.0089 +- 0.003 gives 31.6-40.7 dB at two sigma (at the
    reference wavelength; across the band the coupler slope moves it, see ``kappa_at``).
    """
    p = nominal_params(n_tbus, n_links, defaults)
    return replace(
        p,
        loss_db=np.clip(p.loss_db + rng.normal(0, loss_spread_db, n_tbus), 0, None),
        kappa1=np.clip(p.kappa1 + rng.normal(0, kappa_spread, n_tbus), 0.01, 0.99),
        kappa2=np.clip(p.kappa2 + rng.normal(0, kappa_spread, n_tbus), 0.01, 0.99),
        arm_imbalance_db=np.abs(p.arm_imbalance_db + rng.normal(0, arm_imbalance_spread_db, n_tbus)),
        offset_top=rng.uniform(0, 2 * np.pi, n_tbus),
        offset_bot=rng.uniform(0, 2 * np.pi, n_tbus),
    )


def propagation_phase(params: TBUParams, wavelengths_nm: np.ndarray) -> np.ndarray:
    """Propagation phase of each basic unit, shape (n_wl, n_tbus), rad.

    ``phase0 + 2 pi delay (f - f0)``: the group delay sets the slope in frequency, so a
    loop of N units has a free spectral range of 1 / (N delay).
    """
    f = C_UM_PER_PS / (np.asarray(wavelengths_nm, dtype=float)[:, None] * 1e-3)  # THz
    f0 = C_UM_PER_PS / (params.center_wavelength_nm * 1e-3)
    return params.phase0[None, :] + 2 * np.pi * params.delay_ps[None, :] * (f - f0)


def heater_phase_scale(
    wavelengths_nm: np.ndarray | float, center_wavelength_nm: float = 1550.0
) -> np.ndarray:
    """Factor ``lambda0 / lambda`` by which a heater phase set at ``lambda0`` scales.

    A heater changes the arm's index by ``dn``; the phase ``2 pi dn L / lambda`` is
    inversely proportional to the wavelength (see ``SOURCES["heater_phase_scaling"]``).

    Example:
        >>> round(float(heater_phase_scale(1560.0)), 6)  # a pi set at 1550 nm at 1560 nm
        0.99359
    """
    return center_wavelength_nm / np.asarray(wavelengths_nm, dtype=float)


def kappa_at(
    kappa: np.ndarray | float,
    wavelengths_nm: np.ndarray | float,
    slope_per_nm: np.ndarray | float = 0.0,
    center_wavelength_nm: float = 1550.0,
) -> np.ndarray:
    """Coupler power cross-coupling at ``wavelengths_nm``: ``kappa + slope (lambda - lambda0)``.

    Shapes broadcast as ``kappa[None, :]`` against ``wavelengths_nm[:, None]`` when
    ``kappa`` is per TBU (n,) and the wavelengths a vector (W,): the result is (W, n).
    Clipped to [0, 1] (a coupler cannot couple more than all of its power).

    Example:
        >>> float(kappa_at(0.5, 1560.0, 0.0025))  # 10 nm above the reference
        0.525
    """
    wl = np.asarray(wavelengths_nm, dtype=float)
    k = np.asarray(kappa, dtype=float)
    s = np.asarray(slope_per_nm, dtype=float)
    if wl.ndim == 1 and k.ndim == 1:
        wl = wl[:, None]
    return np.clip(k + s * (wl - center_wavelength_nm), 0.0, 1.0)


def coupler(kappa: np.ndarray) -> np.ndarray:
    """Directional coupler matrix, shape (..., 2, 2), for power coupling ``kappa``."""
    kappa = np.asarray(kappa, dtype=float)
    t, k = np.sqrt(1 - kappa), 1j * np.sqrt(kappa)
    return np.stack([np.stack([t, k], -1), np.stack([k, t], -1)], -2)


def mzi_transfer(
    phi_top: np.ndarray,
    phi_bot: np.ndarray,
    kappa1: np.ndarray | float = 0.5,
    kappa2: np.ndarray | float = 0.5,
    loss_db: np.ndarray | float = 0.0,
    arm_imbalance_db: np.ndarray | float = 0.0,
    common_phase: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Forward field transfer matrix of a TBU, shape (..., 2, 2) (row: b0/b1, col: a0/a1).

    ``phi_top``/``phi_bot`` are the total arm phases (rad); everything broadcasts.

    Example:
        >>> T = mzi_transfer(0.0, 0.0)  # equal arms -> cross
        >>> np.round(abs(T) ** 2, 6).tolist()
        [[0.0, 1.0], [1.0, 0.0]]
    """
    phi_top, phi_bot = np.broadcast_arrays(np.asarray(phi_top, float), np.asarray(phi_bot, float))
    amp_bot = 10 ** (-np.asarray(arm_imbalance_db, float) / 20)
    gain = 10 ** (-np.asarray(loss_db, float) / 20) * np.exp(1j * np.asarray(common_phase, float))
    c1, c2 = coupler(kappa1), coupler(kappa2)
    top = np.exp(1j * phi_top)
    bot = amp_bot * np.exp(1j * phi_bot)
    # T = c2 @ diag(top, bot) @ c1, written out so it broadcasts over any batch shape.
    t00 = c2[..., 0, 0] * top * c1[..., 0, 0] + c2[..., 0, 1] * bot * c1[..., 1, 0]
    t01 = c2[..., 0, 0] * top * c1[..., 0, 1] + c2[..., 0, 1] * bot * c1[..., 1, 1]
    t10 = c2[..., 1, 0] * top * c1[..., 0, 0] + c2[..., 1, 1] * bot * c1[..., 1, 0]
    t11 = c2[..., 1, 0] * top * c1[..., 0, 1] + c2[..., 1, 1] * bot * c1[..., 1, 1]
    T = np.stack([np.stack([t00, t01], -1), np.stack([t10, t11], -1)], -2)
    return gain[..., None, None] * T


State = Literal["bar", "cross"]


def split_phases(
    cross_fraction: np.ndarray | float,
    offset_top: np.ndarray | float = 0.0,
    offset_bot: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Heater phases (top, bot) in [0, 2 pi) that send ``cross_fraction`` of power across.

    For ideal couplers the cross power is ``cos^2(dphi / 2)`` with ``dphi`` the total
    top-minus-bottom phase. Heaters only add phase, so the differential phase is put on
    whichever heater needs less (power is proportional to phase); the passive offsets
    are cancelled. 0 gives bar, 1 gives cross.

    Example:
        >>> top, bot = split_phases(0.0)   # bar
        >>> round(float(top - bot), 6)
        3.141593
    """
    r = np.asarray(cross_fraction, dtype=float)
    if np.any((r < 0) | (r > 1)):
        raise StateError("cross_fraction must lie in [0, 1] (0 = bar, 1 = cross)")
    dphi = 2 * np.arccos(np.sqrt(r))  # wanted total top-minus-bottom phase
    need = np.mod(dphi - (np.asarray(offset_top, float) - np.asarray(offset_bot, float)), 2 * np.pi)
    on_top = need <= np.pi + 1e-12
    top = np.where(on_top, need, 0.0)
    bot = np.where(on_top, 0.0, 2 * np.pi - need)
    return top, bot


def state_phases(
    state: State | np.ndarray,
    offset_top: np.ndarray | float = 0.0,
    offset_bot: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Heater phases for "bar" or "cross" (or an array of those strings)."""
    s = np.asarray(state)
    if not np.isin(s, ["bar", "cross"]).all():
        raise StateError(f"TBU state must be 'bar' or 'cross', got {np.unique(s).tolist()}")
    return split_phases(np.where(s == "cross", 1.0, 0.0), offset_top, offset_bot)


def heater_power_mw(phase: np.ndarray | float, defaults: PhysicsDefaults | None = None) -> np.ndarray:
    """Electrical power (mW) a heater needs for ``phase`` rad (linear in phase)."""
    d = defaults or PhysicsDefaults()
    return np.asarray(phase, dtype=float) * d.heater_power_pi_mw / np.pi

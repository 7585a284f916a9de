"""Polarization at the TE-only port couplers, transceiver bands, and the per-link power budget.

Every mesh port couples to fiber through a TE-only coupler: of an input's power only the
TE projection enters the chip as signal. TM is suppressed by the coupler's polarization
extinction ratio (PER), but what leaks through is not signal: the mesh is calibrated for
TE, so TM light is not routed where the TE light goes (it is stray light, not budget).
A transceiver port declares how its light is polarized:

* ``aligned``: polarization-maintaining fiber or an aligned controller; light is TE.
* ``drifting``: single polarization whose state wanders in the fiber; the worst case is
  the polarized part arriving entirely TM, so only the unpolarized part
  ``(1 - DOP) / 2`` is guaranteed to couple. A fully polarized drifting source
  (DOP = 1, e.g. any laser on standard fiber) can lose the whole link and is refused.
* ``dual``: two polarization channels (e.g. coherent DP-QAM); a TE-only coupler drops
  one of them, so such a link is refused outright.

Bands: the chip is a C-band device (``PhysicsDefaults.band_nm``, 1530-1565 nm). Every
transceiver profile carries its lane wavelength(s); a lane outside the chip's band (an
850 nm short-reach or an O-band LR/ER part), or one its receiver cannot detect, is
refused with :class:`~photonics.errors.BudgetError` before any budget is priced.

Wavelengths a route is checked at: a lane's light is not only at its nominal centre.
Every channel a part transmits (``wavelengths_nm``) occupies a slot of
``channel_width_nm`` (its grid spacing: the laser's end-of-life wavelength tolerance and
its modulated spectrum stay inside it). :func:`check_wavelengths_nm` samples each slot
every :data:`CHANNEL_STEP_NM` from edge to edge; the circuit check
(:mod:`photonics.routing.verify`) reports the worst figure over those points.

Link budget (dB, dBm):
``tx - 2 * fiber_to_chip - access_routing - sum(TBU loss) - polarization_loss``
must reach ``rx_sensitivity + required_margin`` (by default
:data:`photonics.tolerances.REQUIRED_MARGIN_DB`, 3 dB: why there).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from photonics.errors import BudgetError
from photonics.physics import C_BAND_NM, PhysicsDefaults
from photonics.tolerances import REQUIRED_MARGIN_DB

Polarization = Literal["aligned", "drifting", "dual"]
POLARIZATIONS: tuple[str, ...] = ("aligned", "drifting", "dual")


def te_fraction(jones: np.ndarray) -> np.ndarray:
    """Fraction of a Jones vector's power in TE (the first component); shape (..., 2) -> (...).

    Example:
        >>> float(te_fraction(np.array([1, 1j]) / np.sqrt(2)))  # circular light
        0.5
    """
    e = np.asarray(jones, dtype=complex)
    total = (np.abs(e) ** 2).sum(-1)
    if np.any(total <= 0):
        raise BudgetError("a Jones vector must carry power (not all zeros)")
    return np.abs(e[..., 0]) ** 2 / total


def coupled_fraction(
    jones: np.ndarray | None = None,
    *,
    dop: float | None = None,
    per_db: float = PhysicsDefaults.polarization_extinction_db,
) -> float | np.ndarray:
    """Power fraction a TE-only coupler passes: TE share plus the TM share times 10^(-PER/10).

    This is the light that physically enters the chip. Only its TE part is signal for a
    TE-calibrated mesh (:func:`signal_fraction`); the leaked TM is stray light.
    Give either a Jones vector (fully polarized light) or a degree of polarization
    ``dop`` in [0, 1], for which the worst case (polarized part all TM) is returned.

    Example:
        >>> round(float(coupled_fraction(dop=0.0)), 3)  # unpolarized: half is TE
        0.502
    """
    leak = 10 ** (-per_db / 10)
    if (jones is None) == (dop is None):
        raise BudgetError("give exactly one of a Jones vector or a degree of polarization")
    if jones is not None:
        te = te_fraction(jones)
    else:
        if not 0.0 <= float(dop) <= 1.0:
            raise BudgetError(f"degree of polarization must lie in [0, 1], got {dop}")
        te = (1.0 - float(dop)) / 2.0
    return te + (1.0 - te) * leak


def signal_fraction(
    jones: np.ndarray | None = None, *, dop: float | None = None
) -> float | np.ndarray:
    """Power fraction that enters as *signal* for a TE-calibrated mesh: the TE share only.

    TM that leaks through the coupler (``coupled_fraction`` counts it) is not routed by a
    mesh calibrated for TE, so it is not signal. For a degree of polarization the worst
    case (polarized part all TM) is returned: ``(1 - dop) / 2``, zero for ``dop = 1``.

    Example:
        >>> float(signal_fraction(dop=1.0))  # a fully polarized, drifting source
        0.0
    """
    if (jones is None) == (dop is None):
        raise BudgetError("give exactly one of a Jones vector or a degree of polarization")
    if jones is not None:
        return te_fraction(jones)
    if not 0.0 <= float(dop) <= 1.0:
        raise BudgetError(f"degree of polarization must lie in [0, 1], got {dop}")
    return (1.0 - float(dop)) / 2.0


# Telecom bands (nm), ITU-T G.Sup39, and the 850 nm short-reach window (IEEE 802.3 SR).
BANDS_NM: dict[str, tuple[float, float]] = {
    "850 nm short-reach window": (840.0, 960.0),
    "O-band": (1260.0, 1360.0),
    "E-band": (1360.0, 1460.0),
    "S-band": (1460.0, 1530.0),
    "C-band": C_BAND_NM,
    "L-band": (1565.0, 1625.0),
    "U-band": (1625.0, 1675.0),
}
INGAAS_RX_BAND_NM: tuple[float, float] = (1260.0, 1620.0)
"""What a broadband InGaAs PIN/APD receiver without a demultiplexer detects (nm)."""

DWDM_100GHZ_SLOT_NM = 0.8
"""One 100 GHz ITU-T G.694.1 grid slot at 1550 nm (lambda^2 * 100 GHz / c = 0.80 nm): a DWDM
lane's light stays inside it (laser tolerance +-12.5 GHz end of life, 10G spectrum)."""
LAN_WDM_SLOT_NM = 2.06
"""One IEEE 802.3ba LAN-WDM lane range (e.g. 1294.53-1296.59 nm around 1295.56 nm)."""
SR_SLOT_NM = 20.0
"""The 100GBASE-SR4 transmitter's 840-860 nm centre-wavelength range."""
MAX_CHANNEL_WIDTH_NM = 100.0
"""A wider "channel" is a typo, not a part: it would ask for thousands of check points."""
CHANNEL_STEP_NM = 0.025
"""Spacing of the points a channel is checked at (nm, 3.1 GHz at 1550 nm). The mesh's
crosstalk ripples with wavelength (leak paths of different lengths interfere; loops of
many 11.25 ps units give features ~0.05 nm wide), so the worst ACR over a channel hides
between sparse points. Measured on 30 four-route smartlight plans (nominal and fabricated
chips, random channels; docs/physics.md): against a 0.005 nm reference, checking
centre +- half width (3 points) was up to 4.9 dB optimistic, 0.1 nm steps 4.3 dB,
0.05 nm 2.0 dB, 0.025 nm 0.52 dB (33 points per 0.8 nm slot, about 5-15 ms per check)."""


def band_name(wavelength_nm: float) -> str:
    """The name of the band ``wavelength_nm`` lies in (``"C-band"``, ``"O-band"``, ...).

    Example:
        >>> band_name(1309.14), band_name(1550.12)
        ('O-band', 'C-band')
    """
    for name, (lo, hi) in BANDS_NM.items():
        if lo <= wavelength_nm < hi or (name == "C-band" and wavelength_nm == hi):
            return name
    return f"{wavelength_nm:g} nm (no telecom band)"


@dataclass(frozen=True)
class Transceiver:
    """One transceiver lane as the budget sees it (dBm, ms, nm).

    Attributes:
        tx_power_dbm: worst-case (minimum) launch power per lane, dBm.
        rx_sensitivity_dbm: worst-case receiver sensitivity per lane, dBm.
        polarization, dop: the port's polarization declaration (module docstring).
        relock_ms: CDR/DSP re-lock after its light is switched (docs/fabric.md: 5 ms).
        name: profile name.
        wavelengths_nm: centre wavelength of each optical lane the module transmits, nm.
        rx_band_nm: wavelengths its receiver detects, nm (a broadband InGaAs APD/PIN by
            default; a WDM module's demultiplexer narrows it to its own lanes).
        channel_width_nm: width of each lane's channel slot, nm, centred on its
            wavelength: where its light may be over life (laser tolerance plus modulated
            spectrum). 0.8 nm is one 100 GHz DWDM grid slot at 1550 nm; 0 checks the
            centre only.

    The default is the C-band ``dwdm-10g-zr`` lane (see :data:`TRANSCEIVER_PROFILES`).
    """

    tx_power_dbm: float = 0.0
    rx_sensitivity_dbm: float = -23.0
    polarization: Polarization = "aligned"
    dop: float = 1.0
    relock_ms: float = 5.0
    name: str = "dwdm-10g-zr"
    wavelengths_nm: tuple[float, ...] = (1550.12,)
    rx_band_nm: tuple[float, float] = INGAAS_RX_BAND_NM
    channel_width_nm: float = DWDM_100GHZ_SLOT_NM

    def __post_init__(self) -> None:
        if self.polarization not in POLARIZATIONS:
            raise BudgetError(
                f"polarization must be one of {', '.join(POLARIZATIONS)}, not {self.polarization!r}"
            )
        if not 0.0 <= self.dop <= 1.0:
            raise BudgetError(f"dop must lie in [0, 1], got {self.dop}")
        if not self.wavelengths_nm or any(not w > 0 for w in self.wavelengths_nm):
            raise BudgetError(f"transceiver {self.name!r}: give its lane wavelength(s) in nm, "
                              f"got {self.wavelengths_nm!r}")
        if not 0.0 <= self.channel_width_nm < MAX_CHANNEL_WIDTH_NM:
            raise BudgetError(f"transceiver {self.name!r}: channel_width_nm must lie in "
                              f"[0, {MAX_CHANNEL_WIDTH_NM:g}) nm, got {self.channel_width_nm!r}")


TRANSCEIVER_PROFILES: dict[str, Transceiver] = {
    # C band, the chip's band: 10GBASE-ZR-class DWDM SFP+ (EML + APD), ITU 100 GHz grid
    # 1528.77-1563.86 nm, here on channel 34 (193.4 THz, 1550.12 nm); launch 0..+4 dBm,
    # APD sensitivity -23 dBm (Sino-Telecom LX42xxCDR and GAOTek 10G DWDM 80 km SFP+
    # datasheets). The default lane.
    "dwdm-10g-zr": Transceiver(),
    # Its 40 km PIN variant: launch -1..+4 dBm, sensitivity -16 dBm (DWDM XFP/SFP+ 40 km
    # datasheets): 15 dB of budget, too little for a path through the chip.
    "dwdm-10g-er": Transceiver(tx_power_dbm=-1.0, rx_sensitivity_dbm=-16.0, name="dwdm-10g-er"),
    # Outside the chip's band, kept so the tool says why they cannot be used:
    # 100GBASE-SR4 (850 nm VCSELs on multimode fiber; the design's +1 / -10 dBm lane (docs/physics.md)) ...
    "sr-100g": Transceiver(tx_power_dbm=1.0, rx_sensitivity_dbm=-10.0, name="sr-100g",
                           wavelengths_nm=(850.0,), rx_band_nm=(840.0, 860.0),
                           channel_width_nm=SR_SLOT_NM),
    # ... and 100G ER4-lite (O-band LAN-WDM lanes 1295.56/1300.05/1304.58/1309.14 nm, APD).
    "er4lite-100g": Transceiver(tx_power_dbm=2.0, rx_sensitivity_dbm=-21.0, name="er4lite-100g",
                                wavelengths_nm=(1295.56, 1300.05, 1304.58, 1309.14),
                                rx_band_nm=(1294.53, 1310.19), channel_width_nm=LAN_WDM_SLOT_NM),
}
DEFAULT_TRANSCEIVER = "dwdm-10g-zr"


def check_band(tx: Transceiver, rx: Transceiver | None = None,
               defaults: PhysicsDefaults | None = None) -> None:
    """Refuse (BudgetError) a lane the chip cannot carry or its receiver cannot detect.

    Every transmitted wavelength must lie in the chip's band (``defaults.band_nm``, the
    C band by default) and in the receiver's ``rx_band_nm``.

    Example:
        >>> check_band(transceiver_profile("dwdm-10g-zr"))  # C band: fine
        >>> check_band(transceiver_profile("er4lite-100g"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        photonics.errors.BudgetError: transceiver 'er4lite-100g' transmits at 1295.56-1309.14 nm (O-band)...
    """
    d = defaults or PhysicsDefaults()
    lo, hi = d.band_nm
    out = [w for w in tx.wavelengths_nm if not lo <= w <= hi]
    if out:
        span = f"{min(out):g}-{max(out):g}" if len(out) > 1 else f"{out[0]:g}"
        raise BudgetError(
            f"transceiver {tx.name!r} transmits at {span} nm ({band_name(out[0])}), outside the "
            f"chip's band {lo:g}-{hi:g} nm: its couplers, heaters and single-mode TE port couplers "
            "are designed for the C band and cannot carry it; use a C-band lane "
            f"(profiles: {', '.join(_in_band_profiles(d))})"
        )
    if rx is not None:
        rlo, rhi = rx.rx_band_nm
        deaf = [w for w in tx.wavelengths_nm if not rlo <= w <= rhi]
        if deaf:
            raise BudgetError(
                f"receiver {rx.name!r} detects {rlo:g}-{rhi:g} nm but transmitter {tx.name!r} "
                f"sends {deaf[0]:g} nm: pair lanes of the same band and grid"
            )


@functools.lru_cache(maxsize=256)  # lanes are frozen and few; every check asks again
def check_wavelengths_nm(lane: Transceiver) -> tuple[float, ...]:
    """The wavelengths (nm, ascending) a route carrying ``lane`` is checked at.

    Every channel of the lane (each of ``wavelengths_nm``) from one edge of its slot to
    the other (centre +- ``channel_width_nm`` / 2), at most :data:`CHANNEL_STEP_NM`
    apart, both edges and the centre included; the centre alone for a zero width.

    Example:
        >>> check_wavelengths_nm(Transceiver(wavelengths_nm=(1530.33,), channel_width_nm=0.0))
        (1530.33,)
        >>> w = check_wavelengths_nm(Transceiver(wavelengths_nm=(1530.33, 1550.12)))
        >>> len(w), w[0], w[16], w[-1]
        (66, 1529.93, 1530.33, 1550.52)
    """
    half = lane.channel_width_nm / 2
    # An even number of intervals keeps the centre a point; rounding keeps equal points equal.
    steps = 2 * math.ceil(half / CHANNEL_STEP_NM) if half > 0 else 0
    points = {round(float(c + x), 6) for c in lane.wavelengths_nm
              for x in np.linspace(-half, half, steps + 1)}
    return tuple(sorted(points))


def _in_band_profiles(defaults: PhysicsDefaults) -> list[str]:
    lo, hi = defaults.band_nm
    return [n for n, t in TRANSCEIVER_PROFILES.items() if all(lo <= w <= hi for w in t.wavelengths_nm)]


def transceiver_profile(name: str) -> Transceiver:
    """A named transceiver lane profile (see :data:`TRANSCEIVER_PROFILES`)."""
    try:
        return TRANSCEIVER_PROFILES[name]
    except KeyError:
        raise BudgetError(
            f"unknown transceiver profile {name!r}; choose one of {', '.join(TRANSCEIVER_PROFILES)}"
        ) from None


def polarization_loss_db(tx: Transceiver, per_db: float) -> tuple[float, str | None]:
    """Worst-case polarization loss (dB) of a lane's *signal*, and a refusal reason.

    Returns ``(loss_db, reason)``; ``reason`` is None when the declaration is usable.
    Only the TE projection is signal (:func:`signal_fraction`): TM leaking through the
    coupler's PER (``per_db``) is not routed by the TE-calibrated mesh and is not counted.
    A fully polarized drifting source has a worst-case TE projection of zero: infinite
    loss, refused.
    """
    del per_db  # the PER bounds stray TM light, not the signal
    if tx.polarization == "aligned":
        return 0.0, None
    if tx.polarization == "dual":
        return 3.0, (
            "dual-polarization transceiver: the TE-only port coupler drops one polarization "
            "channel; use a single-polarization lane or a polarization-diverse coupler"
        )
    te = float(signal_fraction(dop=tx.dop))
    if te <= 0.0:
        return float("inf"), (
            "fully polarized drifting source (DOP 1): its polarization can arrive all TM, whose "
            "TE projection vanishes, and TM leaking through the coupler is not routed by the "
            "TE-calibrated mesh; declare the port 'aligned' (PM fiber or a polarization "
            "controller) or give the source's real degree of polarization below 1"
        )
    return float(-10 * np.log10(te)), None


@dataclass(frozen=True)
class LinkBudget:
    """The budget of one link (dB/dBm); ``ok`` is False with a ``reason`` when refused."""

    tx_power_dbm: float
    fiber_loss_db: float
    access_loss_db: float
    tbu_loss_db: float
    polarization_loss_db: float
    received_dbm: float
    rx_sensitivity_dbm: float
    required_margin_db: float
    margin_db: float
    ok: bool
    reason: str | None = None


def _shortfall(short_db: float, margin_db: float) -> str:
    """How far a link's margin falls short, for its one line: to 0.01 dB, or, when that would
    print "0.00" (a margin a hair under the requirement), the shortfall and the margin in full, so
    the refusal never reads "short by 0.00 dB" beside two equal powers.
    """
    if round(short_db, 2) > 0:
        return f"{short_db:.2f} dB"
    return f"{short_db:.1g} dB (margin {margin_db:.6f} dB)"


def link_budget(
    tbu_loss_db: float,
    tx: Transceiver | None = None,
    rx: Transceiver | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
) -> LinkBudget:
    """Budget of one link through ``tbu_loss_db`` of mesh (sum of TBU and link losses).

    ``margin_db`` is what is left above ``rx_sensitivity``; the link is usable when that is
    at least ``required_margin_db`` and no polarization channel is lost.

    Raises:
        BudgetError: a lane outside the chip's band, or that its receiver cannot detect
            (:func:`check_band`): such a link is not priced at all.

    Example:
        >>> from photonics.budget import transceiver_profile as tp
        >>> b = link_budget(5.0, tp("dwdm-10g-zr"), tp("dwdm-10g-zr"))
        >>> round(b.margin_db, 2), b.ok
        (7.0, True)
    """
    d = defaults or PhysicsDefaults()
    tx = tx or Transceiver()
    rx = rx or tx
    check_band(tx, rx, d)
    pol_loss, pol_reason = polarization_loss_db(tx, d.polarization_extinction_db)
    fiber = 2 * d.fiber_to_chip_loss_db
    received = tx.tx_power_dbm - fiber - d.access_routing_loss_db - tbu_loss_db - pol_loss
    margin = received - rx.rx_sensitivity_dbm
    reason = pol_reason
    if reason is None and margin < required_margin_db:
        reason = (
            f"budget short by {_shortfall(required_margin_db - margin, margin)}: "
            f"receives {received:.2f} dBm, "
            f"needs {rx.rx_sensitivity_dbm + required_margin_db:.2f} dBm "
            f"({rx.rx_sensitivity_dbm:.1f} dBm sensitivity + {required_margin_db:.1f} dB margin); "
            "use a shorter route, a stronger transmitter or a more sensitive receiver"
        )
    return LinkBudget(
        tx_power_dbm=tx.tx_power_dbm,
        fiber_loss_db=fiber,
        access_loss_db=d.access_routing_loss_db,
        tbu_loss_db=float(tbu_loss_db),
        polarization_loss_db=pol_loss,
        received_dbm=float(received),
        rx_sensitivity_dbm=rx.rx_sensitivity_dbm,
        required_margin_db=required_margin_db,
        margin_db=float(margin),
        ok=reason is None,
        reason=reason,
    )


def require_budget(budget: LinkBudget, link: str = "link") -> LinkBudget:
    """Raise :class:`BudgetError` naming the link when its budget does not close."""
    if not budget.ok:
        raise BudgetError(f"{link} refused: {budget.reason}")
    return budget

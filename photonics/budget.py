"""Polarization at the TE-only port couplers, and the per-link optical power budget.

Every mesh port couples to fiber through a TE-only coupler: of an input's power only the
TE projection enters the chip; TM is suppressed by the coupler's polarization extinction
ratio (PER). A transceiver port declares how its light is polarized:

* ``aligned``: polarization-maintaining fiber or an aligned controller; light is TE.
* ``drifting``: single polarization whose state wanders in the fiber; the worst case is
  the polarized part arriving entirely TM, so only the unpolarized part
  ``(1 - DOP) / 2`` is guaranteed to couple (a fully polarized drifting source may lose
  the whole link).
* ``dual``: two polarization channels (e.g. coherent DP-QAM); a TE-only coupler drops
  one of them, so such a link is refused outright.

Link budget (dB, dBm):
``tx - 2 * fiber_to_chip - access_routing - sum(TBU loss) - polarization_loss``
must reach ``rx_sensitivity + required_margin``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from photonics.errors import BudgetError
from photonics.physics import PhysicsDefaults

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


@dataclass(frozen=True)
class Transceiver:
    """One transceiver lane as the budget sees it (dBm, ms).

    The DESIGN.md default (+1 dBm / -10 dBm, a 100G short-reach lane) leaves 11 dB, which
    two facets (5 dB) and the access routing (6 dB) already use up: no path through a
    SmartLight-class chip closes with it. :data:`TRANSCEIVER_PROFILES` adds an APD-class
    lane (ER4-lite style) that does; see docs/physics.md.
    """

    tx_power_dbm: float = 1.0
    rx_sensitivity_dbm: float = -10.0
    polarization: Polarization = "aligned"
    dop: float = 1.0
    relock_ms: float = 5.0
    name: str = "sr-100g"

    def __post_init__(self) -> None:
        if self.polarization not in POLARIZATIONS:
            raise BudgetError(
                f"polarization must be one of {', '.join(POLARIZATIONS)}, not {self.polarization!r}"
            )
        if not 0.0 <= self.dop <= 1.0:
            raise BudgetError(f"dop must lie in [0, 1], got {self.dop}")


TRANSCEIVER_PROFILES: dict[str, Transceiver] = {
    "sr-100g": Transceiver(),
    "er4lite-100g": Transceiver(tx_power_dbm=2.0, rx_sensitivity_dbm=-21.0, name="er4lite-100g"),
}


def transceiver_profile(name: str) -> Transceiver:
    """A named transceiver lane profile (``sr-100g`` or ``er4lite-100g``)."""
    try:
        return TRANSCEIVER_PROFILES[name]
    except KeyError:
        raise BudgetError(
            f"unknown transceiver profile {name!r}; choose one of {', '.join(TRANSCEIVER_PROFILES)}"
        ) from None


def polarization_loss_db(tx: Transceiver, per_db: float) -> tuple[float, str | None]:
    """Worst-case polarization loss (dB) of a lane into a TE coupler, and a refusal reason.

    Returns ``(loss_db, reason)``; ``reason`` is None when the declaration is usable.
    """
    if tx.polarization == "aligned":
        return 0.0, None
    if tx.polarization == "dual":
        return 3.0, (
            "dual-polarization transceiver: the TE-only port coupler drops one polarization "
            "channel; use a single-polarization lane or a polarization-diverse coupler"
        )
    loss = -10 * np.log10(coupled_fraction(dop=tx.dop, per_db=per_db))
    return float(loss), None


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


def link_budget(
    tbu_loss_db: float,
    tx: Transceiver | None = None,
    rx: Transceiver | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
) -> LinkBudget:
    """Budget of one link through ``tbu_loss_db`` of mesh (sum of TBU and link losses).

    ``margin_db`` is what is left above ``rx_sensitivity``; the link is usable when that is
    at least ``required_margin_db`` and no polarization channel is lost.

    Example:
        >>> from photonics.budget import transceiver_profile as tp
        >>> b = link_budget(5.0, tp("er4lite-100g"), tp("er4lite-100g"))
        >>> round(b.margin_db, 2), b.ok
        (7.0, True)
    """
    d = defaults or PhysicsDefaults()
    tx = tx or Transceiver()
    rx = rx or tx
    pol_loss, pol_reason = polarization_loss_db(tx, d.polarization_extinction_db)
    fiber = 2 * d.fiber_to_chip_loss_db
    received = tx.tx_power_dbm - fiber - d.access_routing_loss_db - tbu_loss_db - pol_loss
    margin = received - rx.rx_sensitivity_dbm
    reason = pol_reason
    if reason is None and margin < required_margin_db:
        reason = (
            f"budget short by {required_margin_db - margin:.2f} dB: receives {received:.2f} dBm, "
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

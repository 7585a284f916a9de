"""The run's operation budget, enforced at the bench: no reading beyond ``Options.max_operations``.

The procedure plans within the budget where it can give work up (rechecks, crosstalk victims,
confirmation re-fits: skipped, their TBUs keep the design law or are named unverified), and
keeps the confirmation's first pass in reserve. The rest (bootstrap, refinement, diagnosis) is
what a map needs at all: a chip that needs more than the budget for it (many failing TBUs,
many retries) is refused, in one line naming the budget and where it ran out, rather than
taken past it. :class:`BudgetedBench` makes that a guarantee: it refuses the reading that
would be one operation too many, whichever stage asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MethodType
from typing import Any

import numpy as np

from calibration.map import CalibrationRefusedError

# The default budget ("auto") is the mesh's nominal plan times this margin, so a chip whose
# rechecks, retried bootstraps and diagnoses cost a third more than the plan still finishes.
# 1.35 x SmartLight's nominal 7,428 rounds to the 10,000 its campaigns were measured with
# (7,620-9,728 used over seeds 0-9 and the trust campaign's 55 chips, docs/calibration.md); a
# fixed 10,000 refused every healthy square:6x6 (13,146-13,708 used) and hex:5x10 chip.
BUDGET_MARGIN = 1.35
# The automatic budget is rounded to this many operations (a figure a user can read and set).
BUDGET_ROUNDING = 100
# ... and never below the 10,000 every smaller mesh was measured with: a small mesh's rechecks,
# retried bootstraps and diagnoses do not shrink with its plan (hex:1x1, nominal ~500, may need
# several re-fits of 66 operations each for the chip the confirmation has to name).
BUDGET_FLOOR = 10_000


def nominal_operations(n_tbus: int, neighbours: Sequence[Sequence[int]], options: Any) -> int:
    """Set-and-read operations of the plan with no recheck, retry or diagnosis.

    Each TBU's two sweeps (``options.points`` + ``options.refine_points`` per heater, two
    heaters), and per TBU the crosstalk baseline (``crosstalk_baseline`` per victim setting, two
    settings) plus one reading per drive level and repeat for each neighbour heater.

    Example:
        >>> from calibration.options import Options
        >>> nominal_operations(2, [[1, 2], [0]], Options())
        177
    """
    sweeps = n_tbus * 2 * (options.points + options.refine_points)
    if options.crosstalk_repeats <= 0:
        return sweeps
    drives = sum(len(levels) for levels in options.crosstalk_drives_rad) * options.crosstalk_repeats
    baseline = len(options.crosstalk_drives_rad) * options.crosstalk_baseline
    return sweeps + sum(baseline + drives * len(near) for near in neighbours)


def operation_budget(options: Any, mesh: Any) -> int | None:
    """The run's budget on ``mesh``: ``options.max_operations``, or for ``"auto"`` the mesh's
    nominal plan times :data:`BUDGET_MARGIN`, at least :data:`BUDGET_FLOOR` (10,000 on SmartLight
    and every smaller mesh, 14,200 on square:6x6).

    Example:
        >>> from calibration.options import Options
        >>> from photonics.topology import smartlight
        >>> operation_budget(Options(), smartlight()), operation_budget(Options(max_operations=500), None)
        (10000, 500)
    """
    if options.max_operations != "auto":
        return options.max_operations
    from calibration.model import heater_positions, neighbour_heaters

    near = neighbour_heaters(heater_positions(mesh.tbu_xy), options.crosstalk_cutoff_tbu)
    nominal = nominal_operations(mesh.n_tbus, near, options)
    return max(BUDGET_FLOOR, round(BUDGET_MARGIN * nominal / BUDGET_ROUNDING) * BUDGET_ROUNDING)


class OperationBudgetError(CalibrationRefusedError):
    """The run reached ``Options.max_operations`` before it could finish its map."""


class BudgetedBench:
    """``bench`` (any :class:`calibration.bench.Bench`), refusing any reading past ``limit``.

    ``limit`` is in the bench's own operation count (the budget less what a resumed run
    already spent, plus the count the bench had when the run began); None: no limit.
    ``where`` is called for the words naming what was being measured when it ran out.
    Everything else is the bench's own (attributes are looked up on it).
    """

    def __init__(self, bench: Any, limit: int | None, budget: int | None, where: Any) -> None:
        self._bench = bench
        self._limit = limit
        self._budget = budget
        self._where = where

    def read_powers_dbm(self, ports: Sequence[int]) -> np.ndarray:
        """The bench's reading, unless it would exceed the budget (:class:`OperationBudgetError`)."""
        if self._limit is not None and self._bench.operations >= self._limit:
            raise OperationBudgetError(
                f"calibration of {self._bench.chip_id} refused: it reached its budget of {self._budget} "
                f"set-and-read operations {self._where()} before its map was finished; past the automatic "
                "budget only a chip with many failing TBUs needs more: check the chip and its bench "
                "(laser, fibres, meter), or give a larger --max-operations (Options.max_operations)")
        return self._bench.read_powers_dbm(ports)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._bench, name)
        if isinstance(value, MethodType):  # a method of the bench (set_currents, wait, ...): kept, so
            self.__dict__[name] = value  # the ~8,500 settings of a run do not look it up again
        return value

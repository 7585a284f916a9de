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
from typing import Any

import numpy as np

from calibration.map import CalibrationRefusedError


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
                f"set-and-read operations (Options.max_operations) {self._where()} before its map was "
                "finished and confirmed; a chip that needs more has many TBUs failing or disagreeing "
                "with light: check the chip and its bench (laser, fibres, meter), then calibrate again")
        return self._bench.read_powers_dbm(ports)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)

"""Pytest fixtures for a simulated LUMION bench (opt-in: ``-p instruments.sim.pytest_plugin``).

Shipped with the package, so downstream lab code can test itself the way we do. It is not a
``pytest11`` entry point (that would load it into every pytest run in the environment):
enable it with ``pytest_plugins = ["instruments.sim.pytest_plugin"]`` in a top-level
``conftest.py`` or ``pytest -p instruments.sim.pytest_plugin``::

    def test_my_sweep(lumion_sim_bench):
        lumion_sim_bench.select_input(5)
        assert lumion_sim_bench.read_powers_dbm([28]).shape == (1,)

Fixtures (function scope; each closes its ports and servers on teardown):

* ``lumion_chip`` -- a seeded smartlight :class:`~instruments.sim.chip.Chip` (seed from
  ``--lumion-seed``, default 0), on simulated time: it moves only with the in-process
  bench's operations and waits, so a test repeats exactly under any load. Served over a
  wire (``lumion_sim_bench``) it follows the wall clock too, as a real chip does.
* ``lumion_sim_bench`` -- an :class:`~instruments.controller.InstrumentBench` over real
  transports (heater driver on a pty, laser and meter over loopback TCP via pyvisa-py),
  all backed by one chip; the simulators are at ``bench.sim``.
* ``lumion_direct_bench`` -- the in-process :class:`~instruments.sim.direct.DirectBench`
  on ``lumion_chip`` (no wire protocol; fastest).
* ``lumion_truth_map`` -- TEST-ONLY oracle heater map from ``lumion_chip``'s hidden truth.
* ``lumion_faults`` -- a :class:`~instruments.sim.faults.FaultInjector` on
  ``lumion_sim_bench``'s links: ``lumion_faults.heater("drop_after")``, ``.laser("delay")``,
  ``.meter("reset")`` -- the byte-level faults of our own fault campaign.

Heavy imports happen inside the fixtures, so enabling the plugin costs nothing until a
fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--lumion-seed``: the simulated chip's seed."""
    group = parser.getgroup("lumion")
    group.addoption("--lumion-seed", type=int, default=0, help="seed of the simulated LUMION chip")


@pytest.fixture
def lumion_chip(request: pytest.FixtureRequest) -> Any:
    """A seeded simulated smartlight chip."""
    from instruments.sim.chip import Chip
    from photonics.topology import smartlight

    return Chip(smartlight(), seed=request.config.getoption("--lumion-seed"))


@pytest.fixture
def lumion_sim_bench(lumion_chip: Any) -> Iterator[Any]:
    """A ready bench over the real wire protocols, around ``lumion_chip``."""
    from instruments.config import open_bench

    bench = open_bench(None, chip=lumion_chip, timeout_s=2.0)
    yield bench
    bench.close()


@pytest.fixture
def lumion_direct_bench(lumion_chip: Any) -> Any:
    """The in-process bench (no wire protocol)."""
    from instruments.sim.direct import DirectBench

    return DirectBench(lumion_chip)


@pytest.fixture
def lumion_truth_map(lumion_chip: Any) -> Any:
    """TEST-ONLY: a heater map from the chip's hidden truth (a real bench has no such thing)."""
    from instruments.sim.truth_map import TruthMap

    return TruthMap(lumion_chip)


@pytest.fixture
def lumion_faults(lumion_sim_bench: Any) -> Any:
    """Byte-level faults on the links of ``lumion_sim_bench`` (see :mod:`instruments.sim.faults`)."""
    from instruments.sim.faults import FaultInjector

    return FaultInjector(lumion_sim_bench.sim)

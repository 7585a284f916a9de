"""Fixtures of the command-line tests."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest


@pytest.fixture
def block_imports(monkeypatch) -> Callable[..., None]:
    """``block_imports("pkg", ...)`` makes ``import pkg`` (and finding it) fail as if the
    package were not installed, for the rest of the test.
    """
    def block(*packages: str) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in packages:
                monkeypatch.delitem(sys.modules, name)
        for package in packages:
            monkeypatch.setitem(sys.modules, package, None)

    return block


@pytest.fixture
def dark_laser(monkeypatch) -> Callable[..., None]:
    """``dark_laser("off")`` makes every bench the command opens have its laser's output switched
    off (it says so); ``dark_laser("dead")``: the laser dead while it reports itself on (-100 dB).
    Keyword arguments are passed to every ``open_bench`` call (``chip=``: the simulated chip).
    """
    import functools

    import instruments.config

    def open_dark(how: str, opener, *args, **kwargs):
        bench = opener(*args, **kwargs)
        if how == "off":
            bench.sim.laser.output_on = False
        else:
            bench.sim.laser.drift(-100.0)
        return bench

    def darken(how: str, **open_kwargs) -> None:
        opener = functools.partial(instruments.config.open_bench, **open_kwargs)
        opened = functools.partial(open_dark, how, opener)
        monkeypatch.setattr(instruments.config, "open_bench", opened)

    return darken


@pytest.fixture
def light_on_the_chips_clock(monkeypatch):
    """Every bench ``lumion failover --bench`` opens in a test using this waits for its modules'
    monitors on the simulated chip's clock (``tests.controlplane.rack.on_chip_time``, as the
    in-process control-plane racks do): the wait moves the chip's time on instead of sleeping
    0.1 s per lane change on the wall clock (issue 29). What light is read and judged is unchanged.
    """
    import instruments.config
    from tests.controlplane.rack import on_chip_time

    real = instruments.config.open_bench

    def opened(*args, **kwargs):
        bench = real(*args, **kwargs)
        on_chip_time(bench, bench.sim.chip)
        return bench

    monkeypatch.setattr(instruments.config, "open_bench", opened)

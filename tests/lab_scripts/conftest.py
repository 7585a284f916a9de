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

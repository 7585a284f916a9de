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

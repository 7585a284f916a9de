"""The examples in the README and docs run, and the docstring examples hold."""

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Pages whose ```python blocks are executed; pages join this list when their examples are
# self-contained (no instruments or long runs).
PAGES = ["README.md", "docs/physics.md", "docs/topology.md", "docs/fabric.md",
         "docs/calibration.md", "docs/layout.md"]
DOCTEST_MODULES = [
    "photonics.topology", "photonics.physics", "photonics.circuit", "photonics.budget",
    "calibration.model", "calibration.heater_map",
]


def _blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page, tmp_path, monkeypatch):
    blocks = _blocks(page)
    assert blocks, f"{page} has no python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, page, "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("module", DOCTEST_MODULES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

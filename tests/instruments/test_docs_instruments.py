"""docs/instruments.md examples run; instruments docstring examples hold."""

import doctest
import re
from pathlib import Path

import instruments.controller

DOC = Path(__file__).resolve().parents[2] / "docs" / "instruments.md"


def test_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "__docs__"})


def test_controller_doctests():
    assert doctest.testmod(instruments.controller).failed == 0

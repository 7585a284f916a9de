"""A command that needs a missing extra exits 69 naming it, before doing any work (issue 29)."""

import json
import tomllib
from pathlib import Path

import pytest

from lab_scripts import schemas
from lab_scripts.cli import main
from lab_scripts.errors import EXIT_UNAVAILABLE
from lab_scripts.extras import PACKAGES

ROOT = Path(__file__).resolve().parents[2]

CASES = [
    # (argv, blocked packages, extra named)
    (["layout", "--mesh", "hex:1x1", "--out", "x.gds", "--png", "x.png"],
     ("gdsfactory", "kfactory", "klayout"), "layout"),
    (["demo", "--out", "lumion-demo"], ("matplotlib",), "plot"),
    (["serve", "--port", "0", "--db", "cp.db"], ("fastapi", "uvicorn"), "serve"),
    (["serve", "--port", "0", "--db", "cp.db"], ("serial",), "serve"),  # was: 'lumion[instruments]'
    (["failover", "--fail", "gpu2", "--plot", "r.png", "--out", "plan.json"], ("matplotlib",), "plot"),
]


@pytest.mark.parametrize(("argv", "packages", "extra"), CASES,
                         ids=[f"{argv[0]}-without-{packages[0]}" for argv, packages, _ in CASES])
def test_a_missing_extra_is_named_before_any_work(argv, packages, extra, tmp_path, monkeypatch, capsys,
                                                   block_imports):
    monkeypatch.chdir(tmp_path)
    block_imports(*packages)
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == EXIT_UNAVAILABLE
    error = json.loads(captured.out)
    schemas.validate(error, "lumion.error")
    assert error["kind"] == "unavailable"
    assert f"pip install 'lumion[{extra}]'" in error["error"]
    assert captured.err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing written: no folder, database, plan or picture


def test_a_library_error_caused_by_a_missing_extra_exits_69():
    from lab_scripts.errors import describe_failure
    from layouts.errors import LayoutDependencyError

    try:
        try:
            raise ModuleNotFoundError("No module named 'gdsfactory'", name="gdsfactory")
        except ModuleNotFoundError as exc:
            raise LayoutDependencyError("drawing layouts needs gdsfactory: pip install 'lumion[layout]'") \
                from exc
    except LayoutDependencyError as exc:
        failure = describe_failure(exc, "lumion layout")
    assert failure.exit_code == EXIT_UNAVAILABLE  # was 2, "fix the file, path or value"


def test_the_serve_extra_installs_what_serve_imports():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "lumion[instruments]" in extras["serve"]
    assert set(PACKAGES["instruments"]) <= set(PACKAGES["serve"])

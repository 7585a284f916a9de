"""A command that needs an optional package which is not installed says which extra to install."""

import json

import pytest

from lab_scripts import schemas
from lab_scripts.cli import main
from lab_scripts.errors import EXIT_UNAVAILABLE, EXTRAS


def run(capsys, argv):
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_a_plot_without_matplotlib_names_the_plot_extra(capsys, tmp_path, monkeypatch, block_imports):
    monkeypatch.chdir(tmp_path)
    block_imports("matplotlib")
    code, d, err = run(capsys, ["simulate", "--mesh", "hex:1x1", "--all", "bar", "--input", "0",
                                "--plot", "s.png"])
    assert code == EXIT_UNAVAILABLE
    assert d["kind"] == "unavailable"
    assert "pip install 'lumion[plot]'" in d["error"]
    assert err.count("\n") == 1  # one line, no traceback
    assert "Traceback" not in err
    assert not (tmp_path / "s.png").exists()
    schemas.validate(d, "lumion.error")


def test_the_same_command_without_a_plot_needs_no_matplotlib(capsys, block_imports):
    block_imports("matplotlib")
    code, d, _ = run(capsys, ["simulate", "--mesh", "hex:1x1", "--all", "bar", "--input", "0"])
    assert code == 0
    assert d["plot"] is None


def test_programming_the_simulated_bench_without_pyvisa_names_the_instruments_extra(
        capsys, tmp_path, monkeypatch, block_imports):
    monkeypatch.chdir(tmp_path)
    assert main(["route", "--connect", "0:20", "--json"]) == 0
    (tmp_path / "plan.json").write_text(capsys.readouterr().out)
    block_imports("pyvisa")
    code, d, _ = run(capsys, ["program", "--configuration", "plan.json"])
    assert code == EXIT_UNAVAILABLE
    assert "pip install 'lumion[instruments]'" in d["error"]


@pytest.mark.parametrize("package", sorted(EXTRAS))
def test_every_listed_extra_exists_in_pyproject(package):
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    assert EXTRAS[package] in extras
    assert EXTRAS[package] in extras["all"][0]

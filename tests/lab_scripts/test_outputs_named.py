"""Every file a command writes is named in its output (text and --json), and the files the
README's examples write in a checkout are ignored by git (issue 29)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab_scripts import schemas
from lab_scripts.cli import main
from lab_scripts.common import output_schema

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = {
    "failover": ["failover", "--fail", "gpu2", "--plot", "recovery.png", "--out", "plan.json"],
    "route": ["route", "--mesh", "smartlight", "--connect", "3:17", "--plot", "routes.png"],
    "simulate": ["simulate", "--mesh", "hex:1x1", "--all", "bar", "--input", "0", "--wavelengths",
                 "1549:1551:5", "--plot", "spectrum.png"],
    "layout": ["layout", "--mesh", "hex:1x1", "--out", "chip.gds", "--png", "chip.png"],
}
NEEDS = {"layout": "gdsfactory"}


def written(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def strings_in(value) -> set[str]:
    """Every string anywhere in a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(strings_in, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(strings_in, value)) if value else set()
    return set()


def run_in(folder: Path, argv: list[str], capsys, monkeypatch) -> str:
    folder.mkdir()
    monkeypatch.chdir(folder)
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_file_written_is_named_in_text_and_json(command, tmp_path, capsys, monkeypatch):
    if command in NEEDS:
        pytest.importorskip(NEEDS[command])
    text = run_in(tmp_path / "text", COMMANDS[command], capsys, monkeypatch)
    files = written(tmp_path / "text")
    assert files
    unnamed = {f for f in files if f not in text}
    assert not unnamed, f"lumion {command} wrote {sorted(unnamed)} without naming them:\n{text}"
    payload = json.loads(run_in(tmp_path / "json", [*COMMANDS[command], "--json"], capsys, monkeypatch))
    assert written(tmp_path / "json") == files
    assert files <= strings_in(payload), f"--json leaves out {sorted(files - strings_in(payload))}"
    # the same run follows the schemas, its output and every JSON file it wrote (the plan of
    # failover --out, the pad map of layout): test_schemas_commands.py ran these commands again
    # for that alone (issue 29)
    name, version = output_schema(command)
    assert (payload["schema"], payload["version"]) == (name, version)
    schemas.validate(payload, name)
    for f in sorted(files):
        assert (tmp_path / "json" / f).stat().st_size > 0, f
        if f.endswith(".json"):
            schemas.validate(json.loads((tmp_path / "json" / f).read_text()))


def git_ignores(name: str) -> bool:
    proc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "-q", name],
                          capture_output=True, check=False)
    if proc.returncode not in (0, 1):
        pytest.skip(f"not a git checkout: {proc.stderr.decode().strip()}")
    return proc.returncode == 0


OUTPUT_OPTION = re.compile(r"(?:--out|--plot|--png|--write-config)\s+(\S+)|>\s*(\S+)")


def readme_outputs() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(?:sh|bash)\n(.*?)^```", text, re.S | re.M)
    return {a or b for block in blocks for a, b in OUTPUT_OPTION.findall(block)} - {"/dev/null"}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_what_the_readme_examples_write_stays_out_of_the_repository():
    outputs = readme_outputs()
    assert {"map.json", "route.json", "bench.toml", "routes.png"} <= outputs
    # and what commands write next to them (pad maps, the TBU picture, the timeline, checkpoints)
    outputs |= {"smartlight.pads.csv", "smartlight.pads.json", "smartlight-tbu.png",
                "recovery-timeline.png", "map.json.ckpt", "lumion-demo/plot.png"}
    tracked = [name for name in sorted(outputs) if not git_ignores(name)]
    assert not tracked, f"README examples write files git would track: {tracked}"
    assert not git_ignores("pyproject.toml")

"""Every example in the README and docs/*.md runs, and the docstring examples hold.

Each fenced ``python`` block runs (the blocks of one page share a namespace, in order), and
each ``sh``/``bash`` block and each ``$ command`` line of a ``console`` block runs under
bash with ``set -e``, all in a temporary folder where ``.venv`` and ``examples`` point at the
checkout's (so ``.venv/bin/lumion ...`` and ``examples/tp4-dp2.toml`` work as written). That
folder's ``.venv/bin/lumion`` (and a bare ``lumion``) is a process forked from a parent that
imported numpy, scipy, matplotlib and lumion once (``tests/docs_lumion.py``), with the
block's arguments, folder, environment and streams, its exit status and its signals; `lumion
bench serve` is the console script itself (a block waits for its pid).

A block that cannot run here (real hardware, a command that serves forever, the whole test
suite) is preceded by ``<!-- docs-test: skip: WHY -->``; the reason is required.
"""

import doctest
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs_lumion import client_script

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
SHELLS = ("sh", "bash", "console")
DOCTEST_MODULES = [
    "photonics.topology", "photonics.physics", "photonics.circuit", "photonics.budget",
    "photonics.configuration", "calibration.model", "calibration.heater_map",
    "lab_scripts.errors", "lab_scripts.paths", "lab_scripts.schemas",
    "photonics.routing.multicast", "photonics.fabric.multicast", "photonics.fabric.multicast_io",
    "photonics.collectives.multicast",
    "photonics.synthesis",
]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(?::\s*(?P<why>.*?))?\s*-->\s*\n\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.S | re.M)
# One shell block may calibrate or lay out a whole chip; past this it is a hang, not a run.
SHELL_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    """One fenced example: where it is, its language and text, and why it is skipped (if)."""

    page: str
    line: int
    lang: str
    body: str
    skip: str | None

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str, root: Path = ROOT) -> list[Block]:
    """The python and shell blocks of ``page``, each with its skip reason if it has one."""
    text = (root / page).read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        lang = m.group("lang").lower()
        if lang not in (*SHELLS, "python"):
            continue
        marker = SKIP.search(text[: m.start()])
        why = None
        if marker:
            why = (marker.group("why") or "").strip()
            assert why, f"{page}:{text[: m.start()].count(chr(10)) + 1}: docs-test: skip needs a reason"
        out.append(Block(page, text[: m.start()].count("\n") + 1, lang, m.group("body"), why))
    return out


def shell_script(block: Block) -> str:
    """The commands of a shell block (a console block's ``$ `` lines)."""
    if block.lang != "console":
        return block.body
    return "\n".join(line[2:] for line in block.body.splitlines() if line.startswith("$ "))


VENV = ROOT / ".venv" if (ROOT / ".venv").exists() else Path(sys.prefix)
# What the forking parent of the blocks' `lumion` processes imports once: what most commands
# import (the plots' matplotlib too), every subcommand's parser and the circuit kernels' machine
# code. Not gdsfactory: importing it starts a thread, and a fork keeps no thread but the caller.
PRELOAD = ["numpy", "scipy.linalg", "scipy.optimize", "scipy.sparse", "matplotlib.pyplot",
           "lab_scripts.cli:build_parser", "photonics.kernel_loader:kernels", "photonics.routing",
           "instruments.config", "instruments.sim.bench", "calibration.procedure"]
ZYGOTE_START_TIMEOUT_S = 120.0  # importing those on a loaded 2-core machine


def shell_env(bin_dir: Path) -> dict[str, str]:
    """The blocks' environment: ``bin_dir`` (the folder's ``.venv/bin``) first on the PATH."""
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}


@pytest.fixture(scope="session")
def lumion_parent():
    """The socket of this worker's forking parent of `lumion` (tests/docs_lumion.py)."""
    # a short folder of its own: a socket's path is limited to 107 bytes, pytest's are long
    folder = Path(tempfile.mkdtemp(prefix="lumion-docs-"))
    path = folder / "lumion.sock"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests/docs_lumion.py"), str(path), *PRELOAD],
                            cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            env=shell_env(VENV / "bin"))
    try:
        assert proc.stdout.readline().strip() == "ready", "the forking parent of lumion did not start"
        yield path
    finally:
        proc.kill()
        proc.wait(ZYGOTE_START_TIMEOUT_S)
        shutil.rmtree(folder, ignore_errors=True)


def fake_venv(folder: Path, socket_path: Path) -> Path:
    """``folder/.venv``: the checkout's environment, but ``bin/lumion`` forks from the parent."""
    venv = folder / ".venv"
    (venv / "bin").mkdir(parents=True)
    for entry in VENV.iterdir():
        if entry.name != "bin":
            (venv / entry.name).symlink_to(entry)
    for entry in (VENV / "bin").iterdir():
        if entry.name != "lumion":
            (venv / "bin" / entry.name).symlink_to(entry)
    client = venv / "bin" / "lumion"
    client.write_text(client_script(sys.executable, str(VENV / "bin" / "lumion"), str(socket_path)))
    client.chmod(0o755)
    return venv


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The examples' folder: ``.venv`` and ``examples`` point at the checkout's."""
    (tmp_path / ".venv").symlink_to(VENV)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def shell_workdir(tmp_path, monkeypatch, lumion_parent):
    """The shell blocks' folder: as ``workdir``, but its ``.venv/bin/lumion`` forks from the
    parent (the Python blocks run in this process and start no `lumion`: no parent for them)."""
    fake_venv(tmp_path, lumion_parent)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_shell(block: Block, cwd: Path) -> None:
    # background jobs (`lumion bench serve ... &`) are stopped when the block ends
    script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + shell_script(block)
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=shell_env(cwd / ".venv" / "bin"),
                          capture_output=True, text=True, timeout=SHELL_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"{block.label} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"


def test_every_page_is_found():
    assert "README.md" in PAGES
    assert "docs/schemas.md" in PAGES
    assert sum(len(blocks(p)) for p in PAGES) >= 15


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang == "python" for b in blocks(p))])
def test_python_examples_run(page, workdir):
    namespace = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page):
        if block.lang != "python" or block.skip:
            continue
        exec(compile(block.body, block.label, "exec"), namespace)
        ran += 1
    assert ran or all(b.skip for b in blocks(page) if b.lang == "python")


SHELL_BLOCKS = [b for p in PAGES for b in blocks(p) if b.lang in SHELLS]


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.label)
def test_shell_examples_run(block, shell_workdir):
    if block.skip:
        pytest.skip(block.skip)
    run_shell(block, shell_workdir)


def test_a_skip_marker_needs_a_reason(tmp_path):
    page = "<!-- docs-test: skip -->\n```sh\nexit 1\n```\n"
    (tmp_path / "page.md").write_text(page)
    with pytest.raises(AssertionError, match="needs a reason"):
        blocks("page.md", tmp_path)
    (tmp_path / "page.md").write_text(page.replace("skip", "skip: it fails on purpose"))
    assert blocks("page.md", tmp_path)[0].skip == "it fails on purpose"


@pytest.mark.parametrize("module", DOCTEST_MODULES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


@pytest.mark.slow
def test_a_block_s_lumion_keeps_its_exit_status_and_output_redirection(shell_workdir):
    """The forked `.venv/bin/lumion` of the blocks fails a block as the console script would,
    and writes where the block redirects it."""
    piped = "lumion mesh --mesh hex:1x1 --json | python3 -c 'import json, sys; json.load(sys.stdin)'"
    ok = Block("page.md", 1, "sh", f".venv/bin/lumion mesh --mesh hex:1x1 --json > m.json\n{piped}\n", None)
    run_shell(ok, shell_workdir)
    assert json.loads((shell_workdir / "m.json").read_text())["schema"] == "lumion.mesh-info"
    bad = Block("page.md", 1, "sh", ".venv/bin/lumion mesh --mesh nope:1x1\n", None)
    said = r"page.md:1 failed \(2\):\n *lumion mesh: error: unknown mesh .nope:1x1."
    with pytest.raises(AssertionError, match=said):
        run_shell(bad, shell_workdir)

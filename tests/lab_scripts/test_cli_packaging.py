"""The wheel builds without warnings and holds what the docs use; every package has __version__."""

import importlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# what a checkout has and a fresh clone does not (build products, caches, environments)
NOT_IN_A_CLONE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis", ".ruff_cache",
                  ".pytest_cache", "lumion-demo")
PACKAGES = ["photonics", "calibration", "instruments", "layouts", "controlplane", "campaigns", "lab_scripts"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_top_level_package_has_the_version(package):
    from lab_scripts import __version__

    assert importlib.import_module(package).__version__ == __version__


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("wheel")
    # built from a copy of the checkout as a clone would have it: setuptools writes build/ and
    # *.egg-info into the source tree, which another test worker may be building at the same
    # time, and a stale build/lib there could put removed modules into the wheel
    source = tmp_path_factory.mktemp("source") / "lumion"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE))
    # PYTHONDONTWRITEBYTECODE (set in some shells) makes setuptools warn that it skips byte-compiling
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if "warn" in line.lower()]
    assert not warnings, warnings
    (path,) = out.glob("lumion-*.whl")
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


@pytest.mark.slow
def test_the_wheel_holds_every_package_and_its_data(wheel):
    for package in PACKAGES:
        assert f"{package}/__init__.py" in wheel
    committed = {p.name for p in (ROOT / "lab_scripts/schemas/json").glob("*.schema.json")}
    assert {Path(n).name for n in wheel if n.startswith("lab_scripts/schemas/json/")} == committed
    examples = {p.name for p in (ROOT / "examples").iterdir() if p.is_file()}
    assert {Path(n).name for n in wheel if n.startswith("lab_scripts/examples/")} == examples
    assert wheel["lab_scripts/examples/tp4-dp2.toml"] == (ROOT / "examples/tp4-dp2.toml").read_bytes()
    assert "controlplane/static/index.html" in wheel
    assert "lab_scripts/py.typed" in wheel


@pytest.mark.slow
def test_the_wheel_declares_the_command_and_no_pytest_plugin(wheel):
    (entry_points,) = [v.decode() for n, v in wheel.items() if n.endswith(".dist-info/entry_points.txt")]
    assert "lumion = lab_scripts.cli:main" in entry_points
    # the simulated-bench fixtures are opt-in: -p instruments.sim.pytest_plugin
    assert "pytest11" not in entry_points
    (metadata,) = [v.decode() for n, v in wheel.items() if n.endswith(".dist-info/METADATA")]
    for extra in ("plot", "instruments", "layout", "serve", "campaign", "all", "dev"):
        assert f"Provides-Extra: {extra}" in metadata
    requires = [line for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not [r for r in requires if any(p in r for p in ("matplotlib", "pyvisa", "pyserial", "smbus2"))]


def _fixtures_seen_by_pytest(folder, *extra):
    (folder / "test_x.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider", *extra,
                           str(folder / "test_x.py")], cwd=folder, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_the_bench_fixtures_stay_out_of_other_projects_pytest_runs(tmp_path):
    """Another project's pytest in the same environment does not load our plugin ..."""
    assert "lumion_sim_bench" not in _fixtures_seen_by_pytest(tmp_path)


@pytest.mark.slow
def test_the_bench_fixtures_load_on_request(tmp_path):
    """... and one that asks for it (-p or pytest_plugins) gets the fixtures."""
    assert "lumion_sim_bench" in _fixtures_seen_by_pytest(tmp_path, "-p", "instruments.sim.pytest_plugin")

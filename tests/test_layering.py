"""Imports point one way: photonics <- calibration <- instruments <- controlplane <- lab_scripts;
photonics <- layouts; campaigns (Dask what-if runs) sit beside controlplane, above instruments."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "photonics": {"photonics"},
    "calibration": {"photonics", "calibration"},
    "instruments": {"photonics", "calibration", "instruments"},
    "layouts": {"photonics", "layouts"},
    "controlplane": {"photonics", "calibration", "instruments", "controlplane"},
    "campaigns": {"photonics", "calibration", "instruments", "campaigns"},
    "lab_scripts": {"photonics", "calibration", "instruments", "layouts", "controlplane", "campaigns",
                    "lab_scripts"},
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_one_way(package):
    ours = set(ALLOWED)
    if not (ROOT / package).is_dir():
        pytest.skip(f"{package}/ does not exist yet")
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in ours:
                    assert top in ALLOWED[package], f"{path.relative_to(ROOT)} imports {name}"


def test_photonics_imports_fast_and_light():
    import subprocess
    import sys

    code = ("import sys, photonics.circuit, photonics.topology, photonics.budget; "
            "print(any(m.startswith(('gdsfactory', 'matplotlib', 'serial', 'pyvisa')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

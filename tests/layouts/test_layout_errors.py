"""Meshes the layout cannot draw fail with a LayoutError that says what to do."""

import subprocess
import sys

import pytest

from layouts.errors import LayoutError
from layouts.geometry import place_mesh
from layouts.mesh_cell import mesh_cell
from layouts.params import LayoutParams
from photonics.errors import LumionError
from photonics.topology import hexagonal, square, triangular


@pytest.mark.parametrize("mesh", [square(2, 2), triangular(1, 3)])
def test_non_hexagonal_mesh_is_refused(mesh):
    with pytest.raises(LayoutError, match="hexagonal meshes only"):
        place_mesh(mesh, 781.0, 15.0, 28.363)


def test_too_wide_mesh_is_refused_before_drawing_everything():
    with pytest.raises(LumionError, match="too wide"):
        mesh_cell("hex:2x20")


def test_too_many_tbus_is_refused():
    with pytest.raises(LayoutError, match="max_tbus"):
        mesh_cell("hex:2x2", max_tbus=10)


def test_bad_parameters_are_refused():
    with pytest.raises(LayoutError, match="pad_pitch"):
        LayoutParams(pad_size=100.0, pad_pitch=80.0)


def test_exits_of_smartlight():
    placement = place_mesh(hexagonal(3, 6), 781.0, 15.0, 28.363)
    directions = [e.direction for e in placement.exits]
    assert directions.count("N") == directions.count("S") == 16
    assert directions.count("W") == directions.count("E") == 4
    assert placement.n_lines == 4


def test_importing_layouts_does_not_import_gdsfactory():
    code = ("import sys, layouts.mesh_cell, layouts.export, lab_scripts.cmd_layout, lab_scripts.cli; "
            "print(any(m.startswith('gdsfactory') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

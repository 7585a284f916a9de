"""Cells are typed gdsfactory cells, PDK-agnostic: the user's PDK stays active, layers come
from its layer map by role, names follow only the parameters a cell uses."""

import collections

import pytest

from layouts.cells import link_bend, tbu_for, tbu_mzi
from layouts.errors import LayoutError, require_gdsfactory
from layouts.mesh_cell import mesh_cell
from layouts.params import LayoutParams
from layouts.pdk import LAYER_ROLES, layer, snap


@pytest.fixture
def user_pdk():
    """A PDK the user activated (the generic PDK under another name); restored afterwards."""
    import gdsfactory as gf  # here, not at the top: collection never imports gdsfactory (issue 29)

    pdk = gf.gpdk.PDK.model_copy(update={"name": "user_pdk"})
    pdk.activate()
    yield pdk
    gf.gpdk.PDK.activate()


def test_the_users_pdk_stays_active(user_pdk):
    gf = require_gdsfactory()
    tbu_mzi(heater_length=390.0)
    mesh_cell("hex:1x1")
    assert gf.get_active_pdk().name == "user_pdk"


def test_layers_come_from_the_active_pdk_by_role(user_pdk):
    assert layer("heater") == user_pdk.layers.HEATER
    assert layer("pad_opening") == user_pdk.layers.PADOPEN
    assert layer("heater", {"heater": "M1"}) == user_pdk.layers.M1
    with pytest.raises(LayoutError, match="layer_map"):
        layer("heater", {"heater": "NO_SUCH_LAYER"})
    with pytest.raises(LayoutError, match="unknown layer role"):
        layer("bondwire")
    assert {"waveguide", "heater", "metal_routing", "pad", "pad_opening"} <= set(LAYER_ROLES)


def test_heater_is_drawn_on_the_heater_role_layer():
    gf = require_gdsfactory()

    tbu = tbu_mzi(layer_map={"heater": "M1"})
    assert tbu.kdb_cell.shapes(gf.get_layer("M1")).size() == 6  # two strips and four bridges
    assert tbu.kdb_cell.shapes(gf.get_layer("HEATER")).size() == 0


def test_tbu_name_ignores_parameters_it_does_not_use():
    base = tbu_for(LayoutParams())
    other = tbu_for(LayoutParams(pad_pitch=100.0, pad_size=70.0, gc_pitch=250.0, margin=80.0))
    assert base.name == other.name
    assert base is other
    assert tbu_for(LayoutParams(heater_length=380.0)).name != base.name


def test_pad_pitch_does_not_rename_the_tbu_inside_the_mesh():
    def tbu_cell_name(cell):
        return next(cell.kcl[i].name for i in cell.called_cells() if cell.kcl[i].name.startswith("tbu_mzi"))

    assert tbu_cell_name(mesh_cell("hex:1x1")) == tbu_cell_name(mesh_cell("hex:1x1", pad_pitch=90.0))


def test_cross_section_is_a_parameter():
    """The waveguide type follows ``cross_section``: the rib has a slab the strip lacks."""
    gf = require_gdsfactory()  # a PDK active for get_layer (alone, no earlier test activated one)
    slab = gf.get_layer("SLAB90")
    strip, rib = link_bend(cross_section="strip"), link_bend(cross_section="rib")
    assert strip.name != rib.name
    assert rib.kdb_cell.begin_shapes_rec(slab).at_end() is False
    assert strip.kdb_cell.begin_shapes_rec(slab).at_end() is True
    mesh = mesh_cell("hex:1x1", cross_section="rib")
    tbu = next(mesh.kcl[i] for i in mesh.called_cells() if mesh.kcl[i].name.startswith("tbu_mzi"))
    assert tbu.settings["cross_section"] == "rib"


@pytest.mark.slow  # builds smartlight (22 s at load 30)
def test_one_cell_per_geometry(smartlight_cell):
    """No two sub-cells of smartlight share a function and (1 nm-rounded) settings."""
    groups = collections.defaultdict(set)
    for index in smartlight_cell.called_cells():
        cell = smartlight_cell.kcl[index]
        settings = cell.settings.model_dump() if hasattr(cell.settings, "model_dump") else dict(cell.settings)
        key = (cell.function_name, repr(_rounded(settings)))
        groups[key].add(cell.name)
    assert {k: v for k, v in groups.items() if len(v) > 1} == {}


def _rounded(value):
    if isinstance(value, float):
        return snap(value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value

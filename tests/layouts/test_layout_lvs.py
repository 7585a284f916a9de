"""LVS for the optics: the drawn chip's extracted netlist, simulated, equals the model's circuit."""

import numpy as np
import pytest

from layouts.lvs import LVS_TOLERANCE, extracted_mesh, layout_vs_model
from layouts.mesh_cell import mesh_cell
from photonics.physics import PhysicsDefaults
from photonics.topology import Mesh, mesh_from_spec

pytestmark = pytest.mark.slow  # layout builds and their LVS (6-8 s each at load 30)


@pytest.mark.slow
def test_smartlight_layout_simulates_as_the_model(smartlight_cell, smartlight_netlist):
    report = layout_vs_model(smartlight_cell, "smartlight", netlist=smartlight_netlist)
    assert report.ok, report.to_dict()
    assert report.max_s_error <= LVS_TOLERANCE
    assert report.basic_unit_um == (811.0, 811.0)


@pytest.mark.slow
def test_extracted_mesh_has_the_models_links_and_ports(smartlight_cell, smartlight_netlist):
    model = mesh_from_spec("smartlight")
    layout, link_um, tbu_um = extracted_mesh(smartlight_cell, model, netlist=smartlight_netlist)
    assert {frozenset(map(int, p)) for p in layout.links} == {frozenset(map(int, p)) for p in model.links}
    assert list(layout.port_tbu_ports) == list(model.port_tbu_ports)
    assert len(link_um) == model.n_links == 122
    np.testing.assert_allclose(link_um, 30.0, atol=1e-9)  # every link drawn 2R + p long
    np.testing.assert_allclose(tbu_um, 781.0)


def test_a_wired_wrong_link_is_caught():
    """The same layout checked against a model whose two links swap TBU ports."""
    cell = mesh_cell("hex:1x2")
    model = mesh_from_spec("hex:1x2")
    links = model.links.copy()
    links[0, 1], links[1, 1] = links[1, 1], links[0, 1]
    swapped = Mesh(model.kind, model.rows, model.cols, model.tbu_names, model.tbu_xy, links,
                   model.port_tbu_ports, model.port_names)
    report = layout_vs_model(cell, swapped)
    assert not report.ok
    assert len(report.missing_links) == 2
    assert len(report.extra_links) == 2
    assert report.max_s_error > 1e-3


def test_one_nanometre_of_basic_unit_is_caught():
    """A model whose basic unit is 1 nm longer than drawn: ~1e-2 rad per link, far above 1e-6."""
    report = layout_vs_model(mesh_cell("hex:1x2"), "hex:1x2",
                             defaults=PhysicsDefaults(basic_unit_length_um=811.001))
    assert not report.ok
    assert not report.missing_links
    assert not report.extra_links
    assert report.max_s_error > 100 * LVS_TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("length", [800.0])
def test_a_layout_drawn_at_another_basic_unit_is_caught(length):
    report = layout_vs_model(mesh_cell("hex:1x2", basic_unit_length=length), "hex:1x2")
    assert not report.ok
    assert report.basic_unit_um == (length, length)

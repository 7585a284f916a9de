"""Heater wiring: gdsfactory electrical routes, and its extracted netlist against the driver's channel map."""

import pytest

from layouts import mesh_cell as mesh_cell_module
from layouts.checks import wiring_report
from layouts.electrical_lvs import electrical_nets, heater_lvs
from layouts.mesh_cell import build_mesh, mesh_cell
from layouts.names import instance_name
from layouts.params import LayoutParams
from layouts.pdk import layer
from layouts.wiring import Terminal
from photonics.topology import mesh_from_spec


@pytest.mark.slow
def test_smartlight_heaters_reach_the_pads_of_their_driver_channels(smartlight_cell):
    report = heater_lvs(smartlight_cell, "smartlight")
    assert report.ok, report.to_dict()
    assert report.n_heaters == 142


@pytest.mark.slow
def test_other_layouts_pass_the_electrical_lvs():
    """hex:4x3 here; SmartLight's fibre-array edge, whose 36-wire pad rows are routed in
    bundles of 12, in tests/layouts/test_layout_fiber_edge.py on the cell its other checks
    build (one SmartLight grating-edge build for both, issue 29)."""
    assert heater_lvs(mesh_cell("hex:4x3"), "hex:4x3").ok


def test_every_wire_is_a_ported_gdsfactory_route_at_the_sized_width():
    """Signal wires are straights and wire_corners with electrical ports, as wide as the sizing says."""
    import gdsfactory as gf

    cell = mesh_cell("hex:1x2", max_line_resistance_ohm=4.0)
    width = cell.info["electrical"]["wire_width_um"]
    assert width > 4.0  # the tight budget widened the wires
    routing = gf.get_layer(layer("metal_routing"))
    corners = [i for i in cell.insts if i.cell.function_name == "wire_corner"]
    straights = [i for i in cell.insts if i.cell.function_name == "wire_straight"
                 and i.cell.settings["layer"] == routing.name]
    assert corners
    assert straights
    for inst in corners + straights:
        assert {p.port_type for p in inst.ports} == {"electrical"}
        assert all(p.width == pytest.approx(width) for p in inst.ports)
    mesh = mesh_from_spec("hex:1x2")
    nets = {name: net for net in electrical_nets(cell) for name in net}
    for tbu in mesh.tbu_names:
        for arm in ("top", "bot"):
            terminal = f"{instance_name(tbu)},{arm}_sig"
            assert any(n.startswith("wire_straight") for n in nets[terminal]), terminal
    tbu_ports = cell.insts[instance_name(mesh.tbu_names[0])].ports
    assert tbu_ports["top_sig"].width == pytest.approx(width)  # via ports follow the sizing


def _swap_first_heaters(terminals):
    """Wire TBU 0's top-arm via as channel 1 and its bottom-arm via as channel 0."""
    swap = {0: 1, 1: 0}
    return [Terminal(swap.get(t.channel, t.channel), t.x, t.y, t.band) for t in terminals]


def test_a_heater_wired_to_another_channels_pad_fails(monkeypatch):
    real = mesh_cell_module._terminals

    def swapped(placement, refs):
        signals, grounds = real(placement, refs)
        return _swap_first_heaters(signals), grounds

    monkeypatch.setattr(mesh_cell_module, "_terminals", swapped)
    mesh = mesh_from_spec("hex:1x2")
    broken = build_mesh(mesh, LayoutParams())
    report = heater_lvs(broken, mesh)
    assert not report.ok
    assert report.wrong_pad == ("tbu:0.0.0/top: channel 0 wants pad_ch0, reaches ['pad_ch1']",
                                "tbu:0.0.0/bot: channel 1 wants pad_ch1, reaches ['pad_ch0']")
    # the drawn metal agrees: klayout finds pad_ch0 on the bottom arm's via (arm 1) of TBU 0
    assert wiring_report(broken)["pad_to_vias"][0] == [(instance_name(mesh.tbu_names[0]), 1)]


def test_a_missing_wire_fails(monkeypatch):
    real = mesh_cell_module.route_signal_wires

    def without_channel_3(c, wires, plan, p, layer_map=None):
        squares = real(c, [w for w in wires if w.channel != 3], plan, p, layer_map)
        return {**squares, 3: 0.0}

    monkeypatch.setattr(mesh_cell_module, "route_signal_wires", without_channel_3)
    mesh = mesh_from_spec("hex:1x2")
    report = heater_lvs(build_mesh(mesh, LayoutParams()), mesh)
    assert not report.ok
    assert report.wrong_pad == ("tbu:0.0.1/bot: channel 3 wants pad_ch3, reaches no pad",)


def test_a_floating_heater_return_fails(monkeypatch):
    real = mesh_cell_module.draw.ground

    def without_first_stub(c, grounds, *args, **kwargs):
        return real(c, grounds[1:], *args, **kwargs)

    monkeypatch.setattr(mesh_cell_module.draw, "ground", without_first_stub)
    mesh = mesh_from_spec("hex:1x2")
    report = heater_lvs(build_mesh(mesh, LayoutParams()), mesh)
    assert not report.ok
    assert report.wrong_pad == ()
    assert "the heater returns sit on 2 nets, not one" in report.ground_faults


def test_a_pad_map_that_disagrees_with_the_driver_fails():
    """The pad map row of a channel must name the heater the driver drives on it."""
    cell = mesh_cell("hex:1x1")
    rows = [dict(r) for r in cell.info["pads"]]
    rows[0]["arm"] = "bot" if rows[0]["arm"] == "top" else "top"

    class Relabelled:
        insts, info = cell.insts, {"pads": rows}

        def get_netlist(self, **kwargs):
            return cell.get_netlist(**kwargs)

    report = heater_lvs(Relabelled(), "hex:1x1")
    assert not report.ok
    assert report.pad_map_mismatch
    assert report.pad_map_mismatch[0].startswith("channel 0:")


@pytest.mark.slow
def test_a_bundle_the_router_cannot_place_is_one_clear_error(monkeypatch):
    """kfactory's router fails a 36-wire pad-row fan-out (why rows go in bundles of 12)."""
    from layouts import routing
    from layouts.errors import LayoutError

    monkeypatch.setattr(routing, "MAX_BUNDLE_WIRES", 100)
    with pytest.raises(LayoutError, match=r"gdsfactory's router could not route 36 wires from the left side"):
        build_mesh(mesh_from_spec("smartlight"), LayoutParams(fiber_io="grating-edge"))


def test_a_drawn_wire_over_the_budget_is_refused(monkeypatch):
    from layouts.errors import LayoutError

    real = mesh_cell_module.route_signal_wires

    def longer(*args, **kwargs):
        return {ch: squares * 10 for ch, squares in real(*args, **kwargs).items()}

    monkeypatch.setattr(mesh_cell_module, "route_signal_wires", longer)
    with pytest.raises(LayoutError, match=r"over max_line_resistance_ohm 50.0; raise it"):
        build_mesh(mesh_from_spec("hex:1x1"), LayoutParams())

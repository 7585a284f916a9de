"""The drawn mesh against the model: optical netlist, port names, heater pads."""

import pytest

from layouts.checks import expected_connectivity, netlist_connectivity, wiring_report
from layouts.electrical_lvs import optical_netlist
from layouts.mesh_cell import mesh_cell
from layouts.names import instance_name
from photonics.topology import mesh_from_spec


def _check_netlist(cell, mesh, netlist):
    """``netlist``: the cell's optical netlist, extracted once for the links and the instance
    names (its instances are get_netlist()'s own, whichever ports it matches)."""
    links, ports = netlist_connectivity(cell, netlist)
    want_links, want_ports = expected_connectivity(mesh)
    assert links == want_links
    assert ports == want_ports
    insts = {name for name in netlist["instances"] if name.startswith("tbu_")}
    assert insts == {instance_name(n) for n in mesh.tbu_names}


def _check_pads(cell, mesh):
    report = wiring_report(cell)
    index = {instance_name(n): i for i, n in enumerate(mesh.tbu_names)}
    assert sorted(report["pad_to_vias"]) == list(range(mesh.n_heaters))
    for ch, vias in report["pad_to_vias"].items():
        # exactly one heater via on the pad's metal, and it is this channel's heater
        assert [(index[inst], arm) for inst, arm in vias] == [divmod(ch, 2)], ch
    assert report["ground_ok"]


@pytest.mark.slow
def test_smartlight_matches_topology(smartlight_cell, smartlight_netlist):
    mesh = mesh_from_spec("smartlight")
    _check_netlist(smartlight_cell, mesh, smartlight_netlist)
    names = {p.name for p in smartlight_cell.ports}
    assert {n for n in names if n.startswith("port:")} == set(mesh.port_names)
    assert {n for n in names if n.startswith("heater:")} == set(mesh.heater_names())
    assert smartlight_cell.info["n_tbus"] == 71
    assert smartlight_cell.info["n_ports"] == 40


@pytest.mark.slow  # the smartlight build (1.5 s on a quiet core); the quick suite checks
# pads against heaters on small meshes in test_layout_electrical_lvs.py
def test_smartlight_pads_reach_their_heaters(smartlight_cell):
    _check_pads(smartlight_cell, mesh_from_spec("smartlight"))


@pytest.mark.slow  # the smartlight build (1.5 s on a quiet core); the quick suite checks
# pads against heaters on small meshes in test_layout_electrical_lvs.py
def test_smartlight_pad_map(smartlight_cell):
    mesh = mesh_from_spec("smartlight")
    rows = [r for r in smartlight_cell.info["pads"] if r["channel"] is not None]
    assert len(rows) == mesh.n_heaters == 142
    for r in rows:
        assert mesh.heater_channel(r["tbu"], r["arm"]) == r["channel"]
        assert r["pad"] == f"pad_ch{r['channel']}"
    # pads never overlap: centres at least one pad pitch apart along the ring
    xy = sorted((r["x"], r["y"]) for r in smartlight_cell.info["pads"])
    assert len(set(xy)) == len(xy)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["hex:1x1", "hex:4x3"])
def test_other_meshes_match_topology(spec):
    mesh = mesh_from_spec(spec)
    cell = mesh_cell(spec)
    _check_netlist(cell, mesh, optical_netlist(cell))
    _check_pads(cell, mesh)


@pytest.mark.slow
def test_netlist_check_catches_a_wrong_link(smartlight_cell, smartlight_netlist):
    mesh = mesh_from_spec("smartlight")
    links, _ = netlist_connectivity(smartlight_cell, smartlight_netlist)
    want, _ = expected_connectivity(mesh)
    broken = set(want)
    broken.remove(next(iter(broken)))
    assert links != broken


@pytest.mark.slow
def test_the_linear_namer_names_as_gdsfactorys_smart_namer():
    """layouts.electrical_lvs.LinearSmartNamer (issue 29: SmartNamer is quadratic in the
    instances of one cell) gives the netlists gdsfactory's SmartNamer gives: optical, and
    electrical with the pads keeping their names. hex:1x1 draws 95 wire pieces of one cell,
    numbered wire_straight2, wire_straight3, ..."""
    from gdsfactory.get_netlist import SmartNamer, function_namer

    from layouts.electrical_lvs import PAD_PREFIXES, MetalPortMatcher, OpticalPortMatcher, PadKeepingNamer

    class SmartPadKeepingNamer:  # PadKeepingNamer as it was, on gdsfactory's SmartNamer
        def __init__(self):
            self._smart = SmartNamer(function_namer)

        def __call__(self, inst):
            return inst.name if (inst.name or "").startswith(PAD_PREFIXES) else self._smart(inst)

    cell = mesh_cell("hex:1x1")
    ours = optical_netlist(cell)
    assert sum(name.startswith("wire_straight") for name in ours["instances"]) > 20
    assert ours == cell.get_netlist(on_dangling_port="ignore", port_matcher=OpticalPortMatcher(),
                                    instance_namer=SmartNamer(function_namer))
    metal = {"port_matcher": MetalPortMatcher(), "on_multi_connect": "ignore", "on_dangling_port": "ignore"}
    assert (cell.get_netlist(**metal, instance_namer=PadKeepingNamer())
            == cell.get_netlist(**metal, instance_namer=SmartPadKeepingNamer()))

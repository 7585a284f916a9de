"""The rack file (lumion.rack v1): loading, one-line refusals, and budgets across fibres."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import photonics.rack.patterns
import photonics.rack.simulate
from photonics.budget import link_budget
from photonics.physics import PhysicsDefaults
from photonics.rack import (
    FabricAllocator,
    RackError,
    TraceJob,
    crossing_loss_db,
    default_rack,
    load_rack,
    parse_rack,
    rack_from_dict,
)
from photonics.rack.circuits import mesh_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rack-two-smartlight.toml"

GOOD = """
schema = "lumion.rack"
version = 1
name = "tiny"

[[mesh]]
name = "a"
spec = "smartlight"

[[mesh]]
name = "b"
spec = "hex:2x3"

[[accelerator]]
name = "g0"
mesh = "a"
tx = ["port:1"]
rx = ["port:0"]

[[accelerator]]
name = "g1"
mesh = "b"
tx = ["port:1"]
rx = ["port:0"]
spare = true

[[fibre]]
name = "f"
a = "a/port:20"
b = "b/port:5"
"""


def test_example_file_is_the_default_rack():
    rack = load_rack(EXAMPLE)
    assert rack.to_dict() == default_rack().to_dict()
    assert len(rack.workers) == 16
    assert len(rack.spares) == 2
    assert len(rack.fibres) == 4
    assert rack.n_lanes == 2


def test_round_trip_and_defaults():
    rack = parse_rack(GOOD, "tiny.toml")
    assert rack.workers == ("g0",)
    assert rack.spares == ("g1",)
    f = rack.fibres[0]
    assert (f.loss_db, f.coupling_db, f.gain_db) == (0.5, PhysicsDefaults.fiber_to_chip_loss_db, 0.0)
    assert f.ends("a") == (20, "b", 5)
    assert f.ends("b") == (5, "a", 20)
    again = rack_from_dict(rack.to_dict())
    assert again.to_dict() == rack.to_dict()


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('version = 1', 'version = 2'), "unsupported rack version 2"),
    (lambda t: t.replace('schema = "lumion.rack"', 'schema = "x"'), "not a LUMION rack"),
    (lambda t: t + "\ncolour = 1\n", "unknown field(s) colour"),
    (lambda t: t.replace('spec = "hex:2x3"', 'spec = "hex:0x3"'), "mesh"),
    (lambda t: t.replace('mesh = "b"', 'mesh = "c"'), "unknown mesh 'c'"),
    (lambda t: t.replace('b = "b/port:5"', 'b = "a/port:5"'), "joins mesh a to itself"),
    (lambda t: t.replace('b = "b/port:5"', 'b = "b/port:1"'), "bound twice"),
    (lambda t: t.replace('a = "a/port:20"', 'a = "a/port:99"'), "port"),
    (lambda t: t.replace('a = "a/port:20"', 'a = "port:20"'), "mesh/port"),
    (lambda t: t.replace('tx = ["port:1"]\nrx = ["port:0"]\n\n[[accelerator]]\nname = "g1"',
                         'tx = ["port:1", "port:3"]\nrx = ["port:0"]\n\n[[accelerator]]\nname = "g1"'),
     "as many tx as rx"),
    (lambda t: t.replace('name = "g1"', 'name = "g0"'), "declared twice"),
    (lambda t: t.replace('b = "b/port:5"', 'b = "b/port:5"\nloss_db = -1'), "loss_db must be"),
    (lambda t: t.replace('b = "b/port:5"', 'b = "b/port:5"\ngain_db = "lots"'), "gain_db must be a number"),
    (lambda t: t.replace('name = "tiny"', 'name = "tiny"\ntransceiver = "nope"'), "unknown transceiver"),
    (lambda t: t.replace('a = "a/port:20"\n', ''), 'must be "mesh/port"'),
    (lambda t: t.replace("spare = true", "spare = 1"), "spare must be true or false"),
    (lambda t: t + "\n[[", "not valid TOML"),
])
def test_refusals_are_one_line(edit, message):
    with pytest.raises(RackError) as err:
        parse_rack(edit(GOOD), "tiny.toml")
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_only_spares_refused():
    with pytest.raises(RackError, match="not a spare"):
        parse_rack(GOOD.replace('name = "g0"\nmesh = "a"', 'name = "g0"\nmesh = "a"\nspare = true'))


def test_missing_file(tmp_path):
    with pytest.raises(RackError, match="not found"):
        load_rack(tmp_path / "none.toml")


def test_crossing_loss_is_fibre_two_facets_access_minus_gain():
    rack = default_rack(gain_db=12.0)
    d = PhysicsDefaults()
    f = rack.fibres[0]
    assert crossing_loss_db(f) == pytest.approx(0.5 + 2 * 2.5 + d.access_routing_loss_db - 12.0)


def test_cross_mesh_circuits_pay_the_fibre_and_close_their_budget():
    rack = default_rack()
    alloc = FabricAllocator(rack)
    members = alloc.place(TraceJob("all", 0.0, 16, "ring", 1.0), rack.names)
    assert members is not None
    crossing = [c for c in alloc.circuits("all") if c.fibres]
    assert len(crossing) >= 2  # a ring over both meshes crosses there and back
    f = {x.name: x for x in rack.fibres}
    for c in alloc.circuits("all"):
        assert c.margin_db >= rack.required_margin_db
        budget = link_budget(c.loss_db, rack.transceiver, rack.transceiver)
        assert c.margin_db == pytest.approx(budget.margin_db)
    for c in crossing:
        assert len(c.segments) == 2
        assert c.segments[0][0] != c.segments[1][0]
        a, b = rack.accelerator(c.link[0]), rack.accelerator(c.link[1])
        assert len(c.fibres) == 1
        out_port, _, in_port = f[c.fibres[0]].ends(a.mesh)
        assert c.segments[0][1].src == a.tx[c.layer]
        assert c.segments[0][1].dst == out_port
        assert c.segments[1][1].src == in_port
        assert c.segments[1][1].dst == b.rx[c.layer]
        assert c.loss_db > crossing_loss_db(f[c.fibres[0]])


def test_without_amplifiers_no_cross_mesh_link_closes():
    rack = default_rack(gain_db=0.0)
    alloc = FabricAllocator(rack)
    assert alloc.place(TraceJob("all", 0.0, 16, "ring", 1.0), rack.names) is None
    assert alloc.place(TraceJob("one", 0.0, 8, "ring", 1.0), rack.names) is not None  # one mesh is fine


@pytest.mark.parametrize("module", [photonics.rack.patterns, photonics.rack.simulate])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


CHAIN = """
schema = "lumion.rack"
version = 1
name = "chain"

[[mesh]]
name = "m0"
spec = "smartlight"

[[mesh]]
name = "m1"
spec = "smartlight"

[[mesh]]
name = "m2"
spec = "smartlight"

[[accelerator]]
name = "a0"
mesh = "m0"
tx = ["port:1"]
rx = ["port:0"]

[[accelerator]]
name = "a1"
mesh = "m0"
tx = ["port:5"]
rx = ["port:4"]

[[accelerator]]
name = "c0"
mesh = "m2"
tx = ["port:1"]
rx = ["port:0"]

[[accelerator]]
name = "c1"
mesh = "m2"
tx = ["port:5"]
rx = ["port:4"]
""" + "".join(f"""
[[fibre]]
name = "{n}"
a = "{a}"
b = "{b}"
gain_db = 12.0
""" for n, a, b in [("x0", "m0/port:36", "m1/port:21"), ("x1", "m0/port:37", "m1/port:33"),
                    ("y0", "m1/port:25", "m2/port:36"), ("y1", "m1/port:29", "m2/port:37")])


def test_a_path_through_a_transit_mesh():
    rack = parse_rack(CHAIN, "chain.toml")
    alloc = FabricAllocator(rack)
    assert alloc.place(TraceJob("r", 0.0, 4, "ring", 1.0), rack.names) == ["a0", "a1", "c0", "c1"]
    f = {x.name: x for x in rack.fibres}
    crossing = [c for c in alloc.circuits("r") if c.fibres]
    assert {c.link for c in crossing} == {("a1", "c0"), ("c1", "a0")}
    for c in crossing:
        assert [m for m, _ in c.segments] in (["m0", "m1", "m2"], ["m2", "m1", "m0"])
        assert len(c.fibres) == 2  # m0 - m1 - m2: no direct fibre
        fixed = sum(crossing_loss_db(f[n]) for n in c.fibres)
        assert c.loss_db > fixed
    # each fibre carries one circuit: with all four in use, no third crossing has a path
    held = set(alloc.occupancy.fibre_owner())
    assert held == {"x0", "x1", "y0", "y1"}
    assert mesh_path(rack, "m0", "m2", held) is None
    assert [x.name for x in mesh_path(rack, "m0", "m2", set())] == ["x0", "y0"]
    assert mesh_path(rack, "m1", "m1", held) == []

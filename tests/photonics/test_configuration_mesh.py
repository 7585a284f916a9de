"""Configurations record the mesh they were made for and are refused on any other."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from photonics.configuration import (
    SCHEMA_VERSION,
    Configuration,
    MeshMismatchError,
    mesh_fingerprint,
    mesh_label,
)
from photonics.errors import StateError
from photonics.routing import route_many
from photonics.topology import Mesh, hexagonal, smartlight, square


def rewired(mesh: Mesh) -> Mesh:
    """A mesh of the same size and names whose first two ports are swapped (other wiring)."""
    data = mesh.to_dict()
    ports = data["ports"]
    ports[0]["tbu_port"], ports[1]["tbu_port"] = ports[1]["tbu_port"], ports[0]["tbu_port"]
    return Mesh.from_dict(data)


def planned(mesh: Mesh, pairs: list[tuple[str, str]]) -> Configuration:
    plan = route_many(mesh, pairs)
    return Configuration.from_routes(mesh, [r.route for r in plan.routes])


def test_fingerprint_tells_meshes_apart_and_ignores_link_order():
    a, b = smartlight(), hexagonal(3, 6)
    assert a is not b
    assert mesh_fingerprint(a) == mesh_fingerprint(b)
    assert len(mesh_fingerprint(a)) == 16
    assert mesh_fingerprint(hexagonal(1, 2)) != mesh_fingerprint(a)
    other = rewired(a)
    assert other.n_tbus == a.n_tbus
    assert other.n_ports == a.n_ports
    assert mesh_fingerprint(other) != mesh_fingerprint(a)
    data = a.to_dict()
    data["links"] = data["links"][::-1]
    assert mesh_fingerprint(Mesh.from_dict(data)) == mesh_fingerprint(a)


def test_labels_name_generated_meshes_and_only_them():
    assert mesh_label(smartlight()) == "smartlight"
    assert mesh_label(hexagonal(1, 2)) == "hex:1x2"
    assert mesh_label(square(2, 3)) == "square:2x3"
    assert mesh_label(rewired(smartlight())) == "custom"


def test_json_records_the_mesh_and_round_trips():
    mesh = hexagonal(1, 2)
    conf = planned(mesh, [("port:0", "port:5")])
    data = conf.to_dict(mesh)
    assert data["version"] == SCHEMA_VERSION == 2
    assert data["mesh"] == "hex:1x2"
    assert data["mesh_fingerprint"] == mesh_fingerprint(mesh)
    back = Configuration.from_dict(data, hexagonal(1, 2))
    np.testing.assert_array_equal(back.cross_fraction, conf.cross_fraction)
    assert back.routes == conf.routes
    assert back.mesh is not None


def test_a_plan_for_hex_1x2_is_refused_on_smartlight_naming_both_meshes():
    small = hexagonal(1, 2)
    data = planned(small, [("port:0", "port:5")]).to_dict(small)
    # the mesh it was made for offered first: a plan used without its --mesh (the default is
    # smartlight) is the likelier mistake (session 41)
    refusal = (r"plan\.json was made for mesh hex:1x2 .*cannot be used on mesh smartlight \(71 TBUs.*; "
               r"give the mesh it was made for \(--mesh hex:1x2\) or plan it again for smartlight")
    with pytest.raises(MeshMismatchError, match=refusal):
        Configuration.from_dict(data, smartlight(), source="plan.json")


def test_a_same_size_differently_wired_mesh_is_refused():
    mesh = smartlight()
    data = planned(mesh, [("port:5", "port:28")]).to_dict(mesh)
    with pytest.raises(MeshMismatchError, match=r"made for mesh smartlight .* on mesh custom"):
        Configuration.from_dict(data, rewired(mesh))


def test_missing_mesh_record_in_version_2_is_refused():
    mesh = hexagonal(1, 2)
    data = Configuration.parked(mesh).to_dict(mesh)
    del data["mesh_fingerprint"]
    with pytest.raises(StateError, match="mesh_fingerprint"):
        Configuration.from_dict(data, mesh)


def test_version_1_files_are_read_only_when_they_list_exactly_the_meshs_tbus(caplog):
    small = hexagonal(1, 2)
    legacy = planned(small, [("port:0", "port:5")]).to_dict(small)
    legacy = {k: v for k, v in legacy.items() if k not in ("mesh", "mesh_fingerprint")} | {"version": 1}
    with caplog.at_level(logging.WARNING, logger="photonics.configuration"):
        back = Configuration.from_dict(legacy, hexagonal(1, 2), source="old.json")
    assert back.mesh is not None
    assert "does not record its mesh" in caplog.text
    with pytest.raises(MeshMismatchError, match=r"old\.json \(version 1: .*lists 11 TBUs, 60 .* missing"):
        Configuration.from_dict(legacy, smartlight(), source="old.json")


def test_python_api_check_mesh_and_to_dict_refuse_another_mesh():
    mesh = smartlight()
    conf = planned(mesh, [("port:5", "port:28")])
    conf.check_mesh(hexagonal(3, 6))  # the same topology built again is the same mesh
    other = rewired(mesh)
    with pytest.raises(MeshMismatchError, match="made for mesh smartlight"):
        conf.check_mesh(other)
    with pytest.raises(MeshMismatchError):
        conf.to_dict(other)
    bare = Configuration(conf.cross_fraction)  # no mesh: only the TBU count can be checked
    bare.check_mesh(other)
    with pytest.raises(MeshMismatchError, match="a mesh of 71 TBUs"):
        bare.check_mesh(hexagonal(1, 2))
    assert bare.for_mesh(mesh).mesh is mesh
    with pytest.raises(MeshMismatchError):
        conf.for_mesh(other)

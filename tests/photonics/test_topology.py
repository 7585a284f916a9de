import json

import numpy as np
import pytest

from photonics.errors import MeshSpecError
from photonics.topology import Mesh, hexagonal, mesh_from_spec, smartlight, square, triangular


@pytest.mark.parametrize(
    ("gen", "rows", "cols", "tbus", "ports"),
    [
        (hexagonal, 1, 1, 6, 12),
        (hexagonal, 2, 1, 11, 16),
        (hexagonal, 3, 6, 71, 40),
        (hexagonal, 9, 9, 278, 76),
        (square, 2, 2, 12, 16),
        (square, 3, 3, 24, 24),
        (triangular, 1, 3, 7, 10),
        (triangular, 2, 4, 16, 16),
    ],
)
def test_counts(gen, rows, cols, tbus, ports):
    m = gen(rows, cols)
    assert (m.n_tbus, m.n_ports, m.n_heaters) == (tbus, ports, 2 * tbus)
    # every TBU port is either linked once or is a mesh port, never both
    assert 2 * m.n_links + m.n_ports == 4 * m.n_tbus


def test_hex_edge_formula():
    # a honeycomb of R x C cells has 3RC + 2R + 2C - 1 edges
    for r in range(1, 6):
        for c in range(1, 6):
            assert hexagonal(r, c).n_tbus == 3 * r * c + 2 * r + 2 * c - 1


def test_smartlight_preset_and_names():
    m = smartlight()
    assert (m.n_tbus, m.n_ports, m.n_heaters) == (71, 40, 142)
    assert m.tbu_names[0] == "tbu:0.0.0"
    assert m.port_names[0] == "port:0"
    assert m.port_names[-1] == "port:39"
    assert m.heater_channel("tbu:0.0.1", "bot") == 3
    assert m.port_index("port:7") == 7
    assert m.port_index("7") == 7
    assert m.port_index(7) == 7


def test_hex_three_way_vertices_join_pairwise():
    m = hexagonal(2, 2)
    # a vertex shared by three TBUs has three links among them
    tbu_of = m.links // 4
    pairs = {tuple(sorted(p)) for p in tbu_of.tolist()}
    assert all(a != b for a, b in pairs)


def test_ports_numbered_clockwise_from_west():
    m = smartlight()
    xy = m.port_xy() - m.tbu_xy.reshape(-1, 2).mean(0)
    angle = np.unwrap(np.arctan2(xy[:, 1], xy[:, 0]))
    # clockwise means the angle keeps decreasing (after unwrapping), starting near west
    assert np.all(np.diff(angle) < 0)
    assert xy[0, 0] < 0
    assert abs(np.arctan2(xy[0, 1], xy[0, 0])) > np.pi / 2


def test_json_round_trip(tmp_path):
    m = hexagonal(2, 3)
    path = tmp_path / "mesh.json"
    m.save(path)
    back = Mesh.load(path)
    assert back.tbu_names == m.tbu_names
    assert back.port_names == m.port_names
    np.testing.assert_array_equal(back.links, m.links)
    np.testing.assert_array_equal(back.port_tbu_ports, m.port_tbu_ports)
    np.testing.assert_allclose(back.tbu_xy, m.tbu_xy, atol=1e-8)
    assert mesh_from_spec(str(path)).n_tbus == m.n_tbus


def test_failed_save_keeps_old_file(tmp_path, monkeypatch):
    m = hexagonal(1, 1)
    path = tmp_path / "mesh.json"
    m.save(path)
    before = path.read_text()

    def boom(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        hexagonal(2, 2).save(path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["mesh.json"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hex:0x3", "positive"),
        ("pentagon:2x2", "unknown mesh"),
        ("hex:3by6", "unknown mesh"),
        ("missing.json", "not found"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(MeshSpecError, match=message):
        mesh_from_spec(spec)


def test_a_size_out_of_range_names_the_spec_not_a_file():
    # `lumion route --mesh hex:0x3` said "cannot read mesh file hex:0x3": the CLI passes the
    # reason through as it is when it names what was given
    with pytest.raises(MeshSpecError, match=r"mesh 'hex:0x3': mesh size must be positive"):
        mesh_from_spec("hex:0x3")


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(MeshSpecError, match="not valid JSON"):
        Mesh.load(bad)
    data = hexagonal(1, 1).to_dict()
    data["version"] = 99
    bad.write_text(json.dumps(data))
    with pytest.raises(MeshSpecError, match="version 99"):
        Mesh.load(bad)
    data = hexagonal(1, 1).to_dict()
    data["links"].append(data["links"][0])
    bad.write_text(json.dumps(data))
    with pytest.raises(MeshSpecError, match="more than once"):
        Mesh.load(bad)
    data = hexagonal(1, 1).to_dict()
    data["links"][0][0] = "tbu:9.9.9/a0"
    bad.write_text(json.dumps(data))
    with pytest.raises(MeshSpecError, match="unknown TBU port"):
        Mesh.load(bad)


def test_unknown_names():
    m = smartlight()
    with pytest.raises(MeshSpecError, match="unknown port"):
        m.port_index("port:x")
    with pytest.raises(MeshSpecError, match="out of range"):
        m.port_index(40)
    with pytest.raises(MeshSpecError, match="unknown TBU"):
        m.tbu_index("tbu:7.7.7")

"""The dashboard server side: the chip drawing and its routes (the page itself: test_dashboard_browser)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from controlplane.dashboard import STATIC, geometry, tbu_port_xy
from photonics.topology import hexagonal, smartlight
from tests.controlplane.rack import Rack


@pytest.mark.parametrize("mesh", [smartlight(), hexagonal(2, 3)], ids=["smartlight", "hex:2x3"])
def test_geometry_matches_the_topology(mesh):
    g = geometry(mesh)
    assert g["schema"] == "lumion.dashboard-geometry"
    assert g["version"] == 1
    assert [t["name"] for t in g["tbus"]] == list(mesh.tbu_names)
    assert [p["name"] for p in g["ports"]] == list(mesh.port_names)
    assert len(g["links"]) == mesh.n_links
    # a mesh port is drawn where the topology puts it, and is the TBU port it names
    np.testing.assert_allclose([p["xy"] for p in g["ports"]], mesh.port_xy(), atol=1e-4)
    for n, p in enumerate(g["ports"]):
        tbu, label = p["tbu_port"].split("/")
        assert tbu == mesh.tbu_names[int(mesh.port_tbu_ports[n]) // 4]
        np.testing.assert_allclose(g["tbus"][mesh.tbu_names.index(tbu)]["ports"][label], p["xy"])
        assert np.hypot(*p["out"]) == pytest.approx(1.0, abs=1e-3)
    # every linked pair of TBU ports is drawn between the two ports' positions
    flat = tbu_port_xy(mesh).reshape(-1, 2)
    np.testing.assert_allclose(np.array(g["links"]), flat[mesh.links], atol=1e-4)
    ends = mesh.tbu_xy.reshape(-1, 2)  # the bounds hold every TBU end (to the drawing's 1e-4 rounding)
    np.testing.assert_allclose(g["bounds"], [*ends.min(axis=0), *ends.max(axis=0)], atol=1e-4)


def test_ports_point_away_from_the_middle():
    g = geometry(smartlight())
    centre = np.mean([t["a"] for t in g["tbus"]] + [t["b"] for t in g["tbus"]], axis=0)
    for p in g["ports"]:
        assert np.dot(np.subtract(p["xy"], centre), p["out"]) > 0


@pytest.mark.slow
def test_page_assets_and_geometry_are_served_without_a_token_and_the_data_is_not(tmp_path):
    from controlplane.app import create_app

    rack = Rack(tmp_path / "cp.db")
    try:
        with TestClient(create_app(rack.cp, token="t0ken")) as client:
            page = client.get("/")
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "/dashboard/static/dashboard.js" in page.text
            for asset, kind in (("dashboard.js", "javascript"), ("dashboard.css", "text/css")):
                r = client.get(f"/dashboard/static/{asset}")
                assert r.status_code == 200
                assert kind in r.headers["content-type"]
                assert r.text == (STATIC / asset).read_text()
            g = client.get("/dashboard/geometry.json").json()
            assert g == geometry(rack.fabric.mesh)
            assert client.get("/api/v1/status").status_code == 401
            assert client.get("/api/v1/status", headers={"Authorization": "Bearer t0ken"}).status_code == 200
    finally:
        rack.close()


def test_the_page_loads_nothing_from_outside():
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        text = (STATIC / name).read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text
        assert "//cdn" not in text

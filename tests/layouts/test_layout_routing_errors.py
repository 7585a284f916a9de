"""A route gdsfactory cannot draw is a one-line LayoutError, never a warning and error markers in the GDS.

Covers the optical bundle to the fibre-array column (:mod:`layouts.fiber_edge`) and the
heater wires (:mod:`layouts.routing`), also when gdsfactory's own configuration says to
ignore routing errors.
"""

import warnings

import pytest

from layouts import fiber_edge, routing
from layouts.errors import LayoutError, require_gdsfactory, routing_errors
from layouts.mesh_cell import build_mesh
from layouts.params import LayoutParams
from photonics.topology import mesh_from_spec

JOG_UM = 3.0  # shorter than the 4 µm wire: kfactory cannot place two corners this close
#: gdsfactory settings of a user who wants routing errors ignored (drawn as markers)
IGNORE_ERRORS = {"on_collision": None, "on_placer_error": None, "raise_on_error": False}


@pytest.fixture
def conf_ignoring_errors():
    """gdsfactory's CONF told to ignore routing errors, restored afterwards.

    Set and restored by hand: pytest's monkeypatch deletes these pydantic "extra" fields
    of gdsfactory's settings on undo instead of restoring them.
    """
    conf = require_gdsfactory().CONF
    saved = {k: getattr(conf, k) for k in IGNORE_ERRORS}
    for k, v in IGNORE_ERRORS.items():
        setattr(conf, k, v)
    yield conf
    for k, v in saved.items():
        setattr(conf, k, v)


def test_a_bundle_the_router_cannot_route_is_one_line_error(monkeypatch, conf_ignoring_errors):
    """hex:2x2 with its column centred on the strip (the old placement): a 16.3 µm jog collides."""

    def centred(strip_ys, pitch, min_jog):
        n, mid = len(strip_ys), (strip_ys[0] + strip_ys[-1]) / 2
        return [round(mid + ((n - 1) / 2 - i) * pitch, 3) for i in range(n)]

    monkeypatch.setattr(fiber_edge, "coupler_column", centred)
    expected = (r"^gdsfactory's router could not route the 20 fibre I/O waveguides to the gc column "
                r"\(Routing collision in .*\); use fiber_io='ring'")
    with pytest.raises(LayoutError, match=expected) as info:
        build_mesh(mesh_from_spec("hex:2x2"), LayoutParams(fiber_io="grating-edge"))
    assert "\n" not in str(info.value)


def test_a_band_route_with_corners_closer_than_the_wire_is_one_line_error(monkeypatch, conf_ignoring_errors):
    """Channel 0's band path gets a 3 µm side step; gdsfactory's placer refuses it."""
    real = routing._clean
    calls = []

    def with_a_jog(points):
        pts = real(points)
        calls.append(pts)
        if len(calls) > 1:
            return pts
        (x0, y0), (x1, y1) = pts[0], pts[1]
        assert x0 == x1  # the via drops vertically onto its track
        mid = (y0 + y1) / 2
        return [pts[0], (x0, mid), (x0 + JOG_UM, mid), (x1 + JOG_UM, y1), *pts[2:]]

    monkeypatch.setattr(routing, "_clean", with_a_jog)
    expected = (r"^gdsfactory's router could not route the wire of heater channel \d+ along its band track "
                r"\(Error while trying to place route .*\); increase wire_pitch$")
    with pytest.raises(LayoutError, match=expected) as info:
        build_mesh(mesh_from_spec("hex:1x2"), LayoutParams())
    assert "\n" not in str(info.value)


def test_a_routing_warning_is_an_error_too():
    """Should a router only warn (gdsfactory's default), the warning becomes the LayoutError."""
    expected = (r"^gdsfactory's router could not route the bundle "
                r"\(Routing failed: Routing collision in c\); widen it$")
    with pytest.raises(LayoutError, match=expected), routing_errors("the bundle", "widen it"):
        warnings.warn("Routing failed: Routing collision in c\nmore text", UserWarning, stacklevel=1)


def test_other_warnings_pass_through():
    with pytest.warns(UserWarning, match="something else"), routing_errors("the bundle"):
        warnings.warn("something else", UserWarning, stacklevel=1)

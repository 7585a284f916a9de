"""The pad planner's fan-out (``layouts.wiring.fan_out``) on a synthetic chip, pure geometry.

A side with no pad column (the west side in the fibre-array edge modes) puts all its
wires on the top and bottom rows; when its half of the rows is too short, the sides
share the rows and its pads pass the middle. These tests check the plan stays planar
(no two wires closer than the wire pitch, no two pads closer than the pad pitch, the
two sides' innermost row pads ``pad_size + gap`` apart) and that what cannot fit is
refused. The drawn chips (gdsfactory's routes, both LVS checks): test_layout_fiber_edge.py.
"""

import itertools
import math

import pytest

from layouts.errors import LayoutError
from layouts.wiring import PadFrame, Wire, fan_out

PITCH, PAD_PITCH, PAD_SIZE, GAP = 10.0, 80.0, 60.0, 50.0
#: 3 mm wide, 1 mm tall: each half of a row holds 17 wire pads (the old limit), the whole
#: row 34 with the sides' innermost pads pad_size + gap apart
FRAME = PadFrame(y_top=500.0, y_bottom=-500.0, x_left=0.0, x_right=3000.0, x_mid=1500.0)
VIA_INSET_UM = 100.0  # how far inside the mesh edge the synthetic wires start


def _wires(n_left: int, n_right: int) -> list[Wire]:
    """Wires arriving at the two mesh edges one track pitch apart, centred on y = 0."""
    wires = []
    for side, n, x_edge, inward in (("L", n_left, FRAME.x_left, 1), ("R", n_right, FRAME.x_right, -1)):
        for i in range(n):
            y = (n - 1) / 2 * PITCH - i * PITCH
            wires.append(Wire(len(wires), [(x_edge + inward * VIA_INSET_UM, y), (x_edge, y)], side))
    return wires


def _plan(n_left: int, n_right: int, no_column: str = "L"):
    wires = _wires(n_left, n_right)
    return wires, fan_out(wires, FRAME, PITCH, PAD_PITCH, PAD_SIZE, GAP, no_column=no_column)


def _segments(w: Wire) -> list[tuple[float, float, float, float]]:
    return [(min(a[0], b[0]), min(a[1], b[1]), max(a[0], b[0]), max(a[1], b[1]))
            for a, b in itertools.pairwise(w.points)]


def _distance(s: tuple[float, ...], t: tuple[float, ...]) -> float:
    """Distance between two axis-aligned segments given as bounding boxes."""
    dx = max(0.0, max(s[0], t[0]) - min(s[2], t[2]))
    dy = max(0.0, max(s[1], t[1]) - min(s[3], t[3]))
    return math.hypot(dx, dy)


def _assert_planar(wires: list[Wire], plan) -> None:
    for a, b in itertools.combinations(wires, 2):
        gap = min(_distance(s, t) for s in _segments(a) for t in _segments(b))
        assert gap >= PITCH - 1e-6, f"wires {a.channel} and {b.channel} come {gap} µm close"
    pads = [w.pad for w in wires] + list(plan.ground_pads)
    for p, q in itertools.combinations(pads, 2):
        assert max(abs(p[0] - q[0]), abs(p[1] - q[1])) >= PAD_PITCH - 1e-6, f"pads {p} and {q} overlap"
    for w in wires:  # every wire ends on its pad, on the row or column it names
        assert w.points[-1] == w.pad
        assert w.pad_edge in ("top", "bottom", "right")
        assert w.pad[1] == {"top": plan.y_pad_top, "bottom": plan.y_pad_bottom}.get(w.pad_edge, w.pad[1])


def test_west_wires_take_row_pads_past_the_middle_when_their_half_is_full():
    """36 west wires need 18 pads per row, one more than the west half holds: refused before."""
    wires, plan = _plan(36, 50)
    _assert_planar(wires, plan)
    for edge in ("top", "bottom"):
        west = [w.pad[0] for w in wires if w.side == "L" and w.pad_edge == edge]
        east = [w.pad[0] for w in wires if w.side == "R" and w.pad_edge == edge]
        assert len(west) == 18
        assert max(west) > FRAME.x_mid  # past the middle of the row
        assert len(east) == 15  # the east side's column takes the rest of its 50
        assert min(east) - max(west) >= PAD_SIZE + GAP - 1e-6
    assert not [w for w in wires if w.side == "L" and w.pad_edge not in ("top", "bottom")]


def test_the_rows_are_split_at_the_middle_while_each_half_suffices():
    """The east column needs 15 of its 50 wires on each row, so each side may take 15 per row.

    The 20 west wires take 15 top pads and 5 bottom ones, all in the west half (the plan
    the sizing has always made when it fits, so the drawn chips did not change).
    """
    wires, plan = _plan(20, 50)
    _assert_planar(wires, plan)
    for edge, n_west in (("top", 15), ("bottom", 5)):
        west = [w.pad[0] for w in wires if w.side == "L" and w.pad_edge == edge]
        east = [w.pad[0] for w in wires if w.side == "R" and w.pad_edge == edge]
        assert (len(west), len(east)) == (n_west, 15)
        assert max(west) < FRAME.x_mid < min(east)


def test_pads_that_do_not_fit_the_shared_rows_are_refused_with_what_to_do():
    """36 west + 60 east wires need 18 + 20 pads per row; a row holds 34."""
    with pytest.raises(LayoutError, match=r"^96 heater pads do not fit around the chip at a 80.0 µm pitch "
                                          r"\(the top and bottom rows hold 68; the west edge holds the "
                                          r"fibre couplers.*fiber_io='ring' or a smaller mesh$"):
        _plan(36, 60)

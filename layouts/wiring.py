"""The plan of the heater wiring on one metal layer (pure geometry, no gdsfactory).

Each heater's signal runs on M3 as a Manhattan polyline from its via stack to a bond
pad; no two wires cross or touch, so one metal layer is enough. The plan places the
pads, sizes the wires (:mod:`layouts.sizing`) and gives the band routes their path;
:mod:`layouts.routing` draws the wires as gdsfactory routes, leaving the fan-out to the
pad arrays (step 3) to gdsfactory's bundle router.

1. **Bands.** The space between two zig-zag lines is a band; each heater wires into the
   band its via stack faces. The middle of an inner band (between the heaters of its
   vertical TBUs) holds horizontal tracks; the bands above the first and below the last
   line grow outward as needed. A wire drops from its via onto its own track and runs
   to the left or right edge of the mesh (whichever is nearer).
2. **Ordering.** On each side, wires whose via is above the tracks take tracks from the
   top down in order of distance to the exit, wires from below take them from the bottom
   up; then a wire's horizontal run never meets another wire's drop.
3. **Fan-out.** At each side the arriving wires (top to bottom) split into three sets:
   the top ones climb and turn along a channel above the chip to pads in the top row,
   the bottom ones mirror that, the middle ones jog to a column of pads on the side
   edge. Nested L-shapes keep every set planar. Each side's row pads start at its own
   end of the row; they stop at the middle unless a side needs more (the west side in
   the fibre-array edge modes has no column), and then the sides share the rows.

All lengths are in µm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from layouts.errors import LayoutError


@dataclass(frozen=True)
class Terminal:
    """A heater's signal via: driver channel, centre (µm) and band it wires into."""

    channel: int
    x: float
    y: float
    band: int  # -1: above line 0; n_lines-1: below the last line; else between k and k+1


@dataclass(frozen=True)
class Frame:
    """Where things are around the mesh (µm), decided by the caller."""

    line_pitch: float  # vertical distance between zig-zag lines
    n_lines: int
    track_half_height: float  # half the track region in the middle of an inner band
    outer_track_start: float  # first track of the outer bands, from line 0 / last line
    x_mid: float  # wires left of this exit left


@dataclass
class Wire:
    """One heater's route: polyline points (µm) and, after the fan-out, its pad."""

    channel: int
    points: list[tuple[float, float]]
    side: str
    pad: tuple[float, float] = (0.0, 0.0)
    pad_edge: str = ""


@dataclass
class BandPlan:
    """Result of step 1-2: the wires up to the mesh edges and the outer band heights."""

    wires: list[Wire]
    top_tracks: int
    bottom_tracks: int
    extra: dict[str, float] = field(default_factory=dict)


def route_bands(terminals: list[Terminal], frame: Frame, pitch: float,
                x_left: float, x_right: float) -> BandPlan:
    """Steps 1-2: give every terminal a track and run it to ``x_left`` or ``x_right``."""
    last = frame.n_lines - 1
    n_inner = int(2 * frame.track_half_height // pitch) + 1
    groups: dict[tuple[int, str], list[Terminal]] = {}
    for t in terminals:
        groups.setdefault((t.band, "L" if t.x < frame.x_mid else "R"), []).append(t)
    wires: list[Wire] = []
    used_top = used_bottom = 0
    for (band, side), items in sorted(groups.items()):
        items.sort(key=lambda t: t.x if side == "L" else -t.x)  # nearest the exit first
        x_exit = x_left if side == "L" else x_right
        if band in (-1, last):  # outer band: tracks stack away from the line
            sign = 1.0 if band == -1 else -1.0
            y0 = -(0 if band == -1 else last) * frame.line_pitch + sign * frame.outer_track_start
            for i, t in enumerate(items):
                y = y0 + sign * i * pitch
                wires.append(Wire(t.channel, [(t.x, t.y), (t.x, y), (x_exit, y)], side))
            if band == -1:
                used_top = max(used_top, len(items))
            else:
                used_bottom = max(used_bottom, len(items))
            continue
        yc = -(band + 0.5) * frame.line_pitch
        hi, lo = yc + frame.track_half_height, yc - frame.track_half_height
        above = [t for t in items if t.y > hi]
        below = [t for t in items if t.y < lo]
        if len(above) + len(below) != len(items):
            raise LayoutError("a heater via lies inside the wiring tracks; shorten heater_length")
        if len(items) > n_inner:
            raise LayoutError(
                f"band {band} needs {len(items)} wire tracks on the {side} side but only {n_inner} "
                "fit; the mesh is too wide for single-layer wiring (use fewer columns, a smaller "
                "wire_pitch or a longer heater_length)")
        for i, t in enumerate(above):
            wires.append(Wire(t.channel, [(t.x, t.y), (t.x, hi - i * pitch), (x_exit, hi - i * pitch)], side))
        for i, t in enumerate(below):
            wires.append(Wire(t.channel, [(t.x, t.y), (t.x, lo + i * pitch), (x_exit, lo + i * pitch)], side))
    return BandPlan(wires, used_top, used_bottom)


@dataclass(frozen=True)
class PadFrame:
    """Extent of the chip contents (µm) that the pad ring goes around."""

    y_top: float  # top of everything inside the ring (couplers included)
    y_bottom: float
    x_left: float  # where wires leave the mesh on the left
    x_right: float
    x_mid: float


@dataclass
class PadPlan:
    """Step 3 result: pad rows/columns positions (µm) and the ground pad centres."""

    y_pad_top: float
    y_pad_bottom: float
    x_pad_left: float
    x_pad_right: float
    ground_pads: list[tuple[float, float]]
    #: x where the wires of each side's pad column ("L", "R") leave the band tracks for
    #: gdsfactory's bundle router (:mod:`layouts.routing`): ``gap`` outside the row wires' columns
    side_front: dict[str, float] = field(default_factory=dict)


def fan_out(wires: list[Wire], pf: PadFrame, pitch: float, pad_pitch: float, pad_size: float,
            gap: float, no_column: str = "") -> PadPlan:
    """Step 3: extend every wire to a bond pad; pads ring the chip at ``pad_pitch``.

    ``no_column``: sides ("L", "R") with no pad column, whose wires all go to the top and
    bottom rows (the west edge keeps room for the fibre-array couplers).

    Each side takes the same number of wires to each row, the fewest with which every
    side's column holds the rest, with its row pads on its own half of the rows. When
    that is more than a half row holds (a tall mesh whose west edge holds the fibre
    couplers), the sides share the rows instead (:func:`_share_rows`): each takes only
    the row pads it needs, so one side's pads may pass the middle of the rows. Layouts
    that fit the half rows are planned exactly as before.

    Raises:
        LayoutError: the pads do not fit even with the rows shared.
    """
    sides = {s: sorted([w for w in wires if w.side == s], key=lambda w: -w.points[-1][1]) for s in "LR"}
    x_first = gap + pad_size / 2 + pad_pitch  # first wire pad, from x_left (ground pad before it)
    row_cap = int((pf.x_mid - pf.x_left - x_first - pad_size / 2 - gap / 2) // pad_pitch) + 1
    k = _equal_rows(sides, pf, pitch, pad_pitch, pad_size, gap, no_column)
    rows = dict.fromkeys(sides, k)
    if k > row_cap:
        rows = _share_rows(sides, pf, (pitch, pad_pitch, pad_size, gap), k, no_column)
    y_pt, y_pb = _row_levels(pf, k, pitch, pad_size, gap)
    ground = []
    x_pads = {}
    fronts = {}
    for s, ws in sides.items():
        sign = 1.0 if s == "L" else -1.0
        x0 = pf.x_left if s == "L" else pf.x_right
        n_t = min(rows[s], len(ws))
        n_b = min(rows[s], len(ws) - n_t)
        top, mid, bot = ws[:n_t], ws[n_t:len(ws) - n_b], ws[len(ws) - n_b:]
        for i, w in enumerate(top):
            _nest(w, x0 - sign * (i + 1) * pitch, pf.y_top + gap + i * pitch,
                  x0 + sign * (x_first + (n_t - 1 - i) * pad_pitch), y_pt, "top")
        for j, w in enumerate(reversed(bot)):
            _nest(w, x0 - sign * (j + 1) * pitch, pf.y_bottom - gap - j * pitch,
                  x0 + sign * (x_first + (n_b - 1 - j) * pad_pitch), y_pb, "bottom")
        ground += [(x0 + sign * (x_first - pad_pitch), y_pt), (x0 + sign * (x_first - pad_pitch), y_pb)]
        # the column's jogs start outside this side's own row-wire columns
        x_col0 = x0 - sign * ((rows[s] + 1) * pitch + gap)
        fronts[s] = x_col0 + sign * pitch
        ys = [w.points[-1][1] for w in mid]
        n_m = len(mid)
        start = (sum(ys) / n_m + (n_m - 1) / 2 * pad_pitch) if n_m else 0.0
        start = min(start, y_pt)
        start = max(start, y_pb + (n_m - 1) * pad_pitch)
        targets = [start - j * pad_pitch for j in range(n_m)]
        up = [j for j in range(n_m) if targets[j] > ys[j] + 1e-6]
        down = [j for j in reversed(range(n_m)) if targets[j] < ys[j] - 1e-6]
        cols = max(len(up), len(down))
        x_pad = x_col0 - sign * ((cols - 1) * pitch + gap + pad_size / 2) if cols else x_col0 - sign * (
            gap + pad_size / 2)
        x_pads[s] = x_pad
        column = {j: i for i, j in enumerate(up)} | {j: i for i, j in enumerate(down)}
        for j, w in enumerate(mid):
            if j in column:
                xc = x_col0 - sign * column[j] * pitch
                w.points += [(xc, ys[j]), (xc, targets[j])]
            w.points.append((x_pad, targets[j]))
            w.pad, w.pad_edge = (x_pad, targets[j]), "left" if s == "L" else "right"
    return PadPlan(y_pt, y_pb, x_pads["L"], x_pads["R"], ground, fronts)


def _row_levels(pf: PadFrame, channels: int, pitch: float, pad_size: float,
                gap: float) -> tuple[float, float]:
    """The y of the top and bottom pad rows beyond ``channels`` row-wire channels (µm)."""
    y_pt = pf.y_top + gap + channels * pitch + gap + pad_size / 2
    y_pb = pf.y_bottom - gap - channels * pitch - gap - pad_size / 2
    return y_pt, y_pb


def _column_cap(pf: PadFrame, channels: int, pitch: float, pad_pitch: float, pad_size: float,
                gap: float) -> int:
    """Pads a side column holds between the two pad rows (both rows included)."""
    y_pt, y_pb = _row_levels(pf, channels, pitch, pad_size, gap)
    return int((y_pt - y_pb) // pad_pitch) + 1


def _equal_rows(sides: dict[str, list[Wire]], pf: PadFrame, pitch: float, pad_pitch: float,
                pad_size: float, gap: float, no_column: str) -> int:
    """Fewest wires per row and side with which every side's column holds the rest."""
    for k in range(max(len(v) for v in sides.values()) + 1):
        col_cap = _column_cap(pf, k, pitch, pad_pitch, pad_size, gap)
        if all(len(v) - 2 * k <= (0 if s in no_column else col_cap) for s, v in sides.items()):
            return k
    return 0  # pragma: no cover - the loop always ends with k large enough for the column


def _row_slots(pf: PadFrame, pad_pitch: float, pad_size: float, gap: float) -> int:
    """Wire pads one row holds between its two ground pads, both sides together.

    The sides' innermost pads keep ``pad_size + gap`` between centres (the clearance the
    half-row split keeps across the middle); a side with no row pad counts its ground pad
    as its innermost one.
    """
    x_first = gap + pad_size / 2 + pad_pitch
    room = pf.x_right - pf.x_left - 2 * x_first - pad_size - gap
    return max(0, int(room // pad_pitch) + 2)


def _share_rows(sides: dict[str, list[Wire]], pf: PadFrame, sizes: tuple[float, float, float, float],
                channels: int, no_column: str) -> dict[str, int]:
    """Each side's wires per row when the sides share the rows.

    ``sizes = (pitch, pad_pitch, pad_size, gap)``. Every side takes the fewest wires per
    row with which its column (none for ``no_column`` sides) holds the rest, its column
    as tall as ``channels`` row-wire channels above and below the mesh make it (the
    fewest with which every column fits, :func:`_equal_rows`). More channels make the
    columns taller, but hold few more pads for much longer row wires: hex:9x9 in the edge
    modes would fit its last 5 pads with 38 more channels, and its wires, widened to
    their resistance budget, then no longer fit the bands. So the channels are not grown.

    Raises:
        LayoutError: the two sides' row pads do not fit one row.
    """
    pitch, pad_pitch, pad_size, gap = sizes
    slots = _row_slots(pf, pad_pitch, pad_size, gap)
    col_cap = _column_cap(pf, channels, pitch, pad_pitch, pad_size, gap)
    rows = {s: max(0, -(-(len(v) - (0 if s in no_column else col_cap)) // 2)) for s, v in sides.items()}
    if sum(rows.values()) <= slots:
        return rows
    n = sum(len(v) for v in sides.values())
    raise LayoutError(
        f"{n} heater pads do not fit around the chip at a {pad_pitch} µm pitch (the top and "
        f"bottom rows hold {2 * slots}"
        + ("; the west edge holds the fibre couplers, so its wires need the rows" if no_column else "")
        + "); use a smaller pad_pitch" + (", fiber_io='ring'" if no_column else "")
        + " or a smaller mesh")


def _nest(w: Wire, x_col: float, y_chan: float, x_pad: float, y_pad: float, edge: str) -> None:
    """Extend a wire: out to its column, along the channel, into its pad (top/bottom row)."""
    y = w.points[-1][1]
    w.points += [(x_col, y), (x_col, y_chan), (x_pad, y_chan), (x_pad, y_pad)]
    w.pad, w.pad_edge = (x_pad, y_pad), edge

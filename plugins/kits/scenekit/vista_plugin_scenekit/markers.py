"""The zoom marker: a tiny dot that the downscaled view cannot show and a zoom shows plainly.

Why one module: two tasks are built on it (``visual_search/zoom-small-v0``: which colour is the dot
at (x, y); ``grounding/zoom-spot-v0``: find the frame, zoom, read its dot), and the trick only holds
if both draw it exactly alike.  A marker is a dot of one answer colour ``c`` inside a square of its
complement ``2*GREY - c``, aligned to the ``factor x factor`` blocks of the full-resolution scene with
exactly half of each block's pixels dot: the box-filtered view (``Image.reduce(factor)``) of every
block is then the background grey, so the view holds no information about the colour.  A dark frame,
whole view pixels wide, shows *where* a marker is; only a zoom shows *what* it is.
"""

from __future__ import annotations

from PIL import Image, ImageDraw

#: Answer colours (channels in 1..255 so the complement 256 - c stays a valid byte); no colour's
#: complement is itself an answer colour, so the crop's colours name the answer without asking which
#: one is the dot and which the square around it.
DOT_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (255, 1, 1), "green": (1, 200, 1), "blue": (1, 1, 255), "orange": (255, 128, 1),
}
GREY = 128
BACKGROUND = (GREY, GREY, GREY)
FRAME = (40, 40, 40)
#: View pixels a grid cell needs beyond the marker itself (the frame and a gap on each side).
CELL_MARGIN = 6


def complement(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """The colour that averages with ``colour`` to the background grey."""
    return (2 * GREY - colour[0], 2 * GREY - colour[1], 2 * GREY - colour[2])


def marker_mask(factor: int, blocks: int = 2) -> list[list[bool]]:
    """A ``blocks*factor`` square: True where the dot is.  In each of its ``factor`` blocks exactly
    half of the pixels are dot (the half nearest the marker centre), so the box-filtered view of every
    block is the mean of the dot colour and its complement: the grey background.  The dot comes out
    as a rounded blob in the middle, its complement as the border around it."""
    side = blocks * factor
    mask = [[False] * side for _ in range(side)]
    centre = side / 2  # a block corner: ``blocks`` is even
    for by in range(blocks):
        for bx in range(blocks):
            cells = [(x, y) for y in range(by * factor, (by + 1) * factor) for x in range(bx * factor, (bx + 1) * factor)]
            cells.sort(key=lambda p: ((p[0] + 0.5 - centre) ** 2 + (p[1] + 0.5 - centre) ** 2, p[1], p[0]))
            for x, y in cells[: factor * factor // 2]:
                mask[y][x] = True
    return mask


def marker_centres(grid: int, display_size: int) -> list[tuple[int, int]]:
    """View coordinates of the marker centres: the cell centres, rounded to whole view pixels (a
    marker centre must sit on a block corner of the full-resolution scene)."""
    cell = display_size / grid
    return [(round((col + 0.5) * cell), round((row + 0.5) * cell)) for row in range(grid) for col in range(grid)]


def check_marker_grid(grid: int, display_size: int, marker: int) -> None:
    """Refuse a layout whose cells cannot hold a marker with its frame (``ValueError`` naming the sizes)."""
    if display_size // grid < marker + CELL_MARGIN:
        raise ValueError(f"display_size {display_size} is too small for a {grid}x{grid} grid of {marker}-pixel "
                         f"markers with frames (each cell needs {marker + CELL_MARGIN} view pixels)")


def frame_half_side(grid: int, display_size: int, marker: int) -> int:
    """Half the side of the frame around a marker, in view pixels: a fifth of a cell, and never
    closer than two pixels to the marker."""
    return max(marker // 2 + 2, round(display_size / grid / 5))


def frame_box(centre: tuple[int, int], half_side: int) -> tuple[int, int, int, int]:
    """The frame's box around ``centre`` in view pixels, inclusive on both ends."""
    cx, cy = centre
    return (cx - half_side, cy - half_side, cx + half_side - 1, cy + half_side - 1)


def draw_framed_marker(full: Image.Image, centre: tuple[int, int], colour: str, *, factor: int, marker: int,
                       half_side: int) -> None:
    """Draw one framed marker of answer colour ``colour`` (a :data:`DOT_COLOURS` name) at the view
    point ``centre`` into the full-resolution scene ``full`` (``factor`` times the view)."""
    x1, y1, x2, y2 = frame_box(centre, half_side)
    ImageDraw.Draw(full).rectangle((x1 * factor, y1 * factor, (x2 + 1) * factor - 1, (y2 + 1) * factor - 1),
                                   outline=FRAME, width=factor)
    dot, ring = DOT_COLOURS[colour], complement(DOT_COLOURS[colour])
    half = marker // 2
    left, top = (centre[0] - half) * factor, (centre[1] - half) * factor
    for y, row in enumerate(marker_mask(factor, marker)):
        for x, inside in enumerate(row):
            full.putpixel((left + x, top + y), dot if inside else ring)

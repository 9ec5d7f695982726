"""Seeded synthetic SVG targets built from primitives (rectangles, circles, ellipses, triangles, lines).

Every number comes from ``random.Random(seed)`` and is rounded to a whole unit, so a seed gives the
same document (and, through cairo, the same pixels) on any machine, and the document is short and
readable enough to serve as the oracle answer and as SFT data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PALETTE: dict[str, str] = {
    "red": "#dc2828", "green": "#28aa3c", "blue": "#2850dc", "orange": "#f09614",
    "purple": "#963cbe", "black": "#141414", "teal": "#14a0a0", "yellow": "#e6c814",
}
PRIMITIVES: tuple[str, ...] = ("rect", "circle", "ellipse", "triangle", "line")
VIEWBOX = 100


@dataclass(frozen=True)
class SvgTarget:
    """One target: its id, its SVG document (also the oracle answer) and where it came from."""

    id: str
    svg: str
    source: str = "synthetic"
    metadata: dict[str, object] = field(default_factory=dict)


def _shape(rng: random.Random, kind: str, colour: str) -> str:
    if kind == "rect":
        w, h = rng.randint(15, 50), rng.randint(15, 50)
        x, y = rng.randint(0, VIEWBOX - w), rng.randint(0, VIEWBOX - h)
        return f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{colour}"/>'
    if kind == "circle":
        r = rng.randint(8, 25)
        cx, cy = rng.randint(r, VIEWBOX - r), rng.randint(r, VIEWBOX - r)
        return f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{colour}"/>'
    if kind == "ellipse":
        rx, ry = rng.randint(8, 30), rng.randint(8, 30)
        cx, cy = rng.randint(rx, VIEWBOX - rx), rng.randint(ry, VIEWBOX - ry)
        return f'<ellipse cx="{cx}" cy="{cy}" rx="{rx}" ry="{ry}" fill="{colour}"/>'
    if kind == "triangle":
        points = " ".join(f"{rng.randint(5, 95)},{rng.randint(5, 95)}" for _ in range(3))
        return f'<polygon points="{points}" fill="{colour}"/>'
    x1, y1, x2, y2 = (rng.randint(5, 95) for _ in range(4))
    width = rng.randint(2, 6)
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-width="{width}"/>'


def synthetic_target(seed: int, min_shapes: int = 1, max_shapes: int = 4,
                     primitives: tuple[str, ...] = PRIMITIVES) -> SvgTarget:
    """A white 100x100 canvas with ``min_shapes``..``max_shapes`` coloured primitives, drawn from ``seed``."""
    rng = random.Random(seed)
    count = rng.randint(min_shapes, max_shapes)
    shapes = []
    kinds = []
    for _ in range(count):
        kind = rng.choice(primitives)
        colour = PALETTE[rng.choice(sorted(PALETTE))]
        kinds.append(kind)
        shapes.append(_shape(rng, kind, colour))
    body = "".join(shapes)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {VIEWBOX} {VIEWBOX}">'
           f'<rect width="{VIEWBOX}" height="{VIEWBOX}" fill="#ffffff"/>{body}</svg>')
    return SvgTarget(f"synthetic-{seed}", svg, "synthetic", {"shapes": kinds})

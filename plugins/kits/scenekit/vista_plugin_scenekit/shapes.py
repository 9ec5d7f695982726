"""Named colours and filled shapes drawn into a Pillow image: the vocabulary of the synthetic scenes
(visual search's distractors and targets, grounding's spatial objects and GUI icons).  One definition,
so a colour name means the same RGB in every env that draws it."""

from __future__ import annotations

import math

from PIL import ImageDraw

#: Scene colours by name; distinct enough that a name identifies an object in a scene.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (215, 40, 40), "green": (40, 160, 60), "blue": (40, 80, 215), "orange": (240, 140, 20),
    "purple": (140, 60, 190), "brown": (130, 80, 40), "black": (25, 25, 25), "pink": (255, 105, 180),
    "yellow": (250, 220, 30), "cyan": (30, 200, 210),
}
#: The plain shapes; ``star`` is drawable too but kept out, so a scene can make "the only star" unique.
DISTRACTOR_SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond")
SHAPES: tuple[str, ...] = (*DISTRACTOR_SHAPES, "star")


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[float, float, float, float],
               fill: tuple[int, int, int]) -> None:
    """Draw ``shape`` (one of :data:`SHAPES`) filling ``box``; an unknown shape is a caller's bug."""
    x1, y1, x2, y2 = box
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    elif shape == "triangle":
        draw.polygon([(x1, y2), (cx, y1), (x2, y2)], fill=fill)
    elif shape == "diamond":
        draw.polygon([(cx, y1), (x2, cy), (cx, y2), (x1, cy)], fill=fill)
    elif shape == "star":
        outer, inner = (x2 - x1) / 2, (x2 - x1) / 5
        points = []
        for k in range(10):
            radius = outer if k % 2 == 0 else inner
            angle = -math.pi / 2 + k * math.pi / 5
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        draw.polygon(points, fill=fill)
    else:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")

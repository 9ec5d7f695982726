"""Seeded high-resolution search scenes: many distractor shapes and one small target whose
attribute (colour, shape, count of dots, or a short word) is asked.  The target is identified by
something no distractor has (the only star, the only pink object, the only bordered panel, the only
yellow sign), so the question has one answer; it is small enough that the downscaled view does not
show the attribute, which is what makes zooming necessary.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from PIL import Image, ImageDraw, ImageFont
from vista_plugin_scenekit.shapes import COLOURS, DISTRACTOR_SHAPES, draw_shape

TargetKind = Literal["colour", "shape", "count", "text"]
TARGET_KINDS: tuple[TargetKind, ...] = ("colour", "shape", "count", "text")
WORDS = ("BIRD", "CAKE", "DOOR", "FISH", "GOLD", "HAND", "KITE", "LAMP", "MOON", "NEST", "PEAR", "ROPE",
         "SHIP", "TREE", "WOLF", "ZERO")


@dataclass
class Scene:
    image: Image.Image
    kind: TargetKind
    question: str
    answer: str
    target_box: tuple[int, int, int, int]  # full-resolution pixels
    description: str

    @property
    def target_centre(self) -> tuple[float, float]:
        x1, y1, x2, y2 = self.target_box
        return (x1 + x2) / 2, (y1 + y2) / 2


def _overlaps(box: tuple[int, int, int, int], boxes: list[tuple[int, int, int, int]], margin: int) -> bool:
    return any(box[0] < b[2] + margin and b[0] < box[2] + margin and box[1] < b[3] + margin and b[1] < box[3] + margin
               for b in boxes)


def generate_scene(seed: int, size: int = 1536, distractors: int = 160,
                   kinds: tuple[TargetKind, ...] = TARGET_KINDS) -> Scene:
    rng = random.Random(seed)
    kind = rng.choice(list(kinds))
    background = tuple(rng.randint(225, 250) for _ in range(3))
    image = Image.new("RGB", (size, size), background)  # type: ignore[arg-type]
    draw = ImageDraw.Draw(image)
    for _ in range(40):  # faint texture so the background is not trivially uniform
        x, y, r = rng.randrange(size), rng.randrange(size), rng.randint(40, 160)
        shade = tuple(max(0, c - rng.randint(3, 12)) for c in background)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=shade)

    margin = 80
    if kind == "colour":
        colour = rng.choice([c for c in COLOURS if c not in ("pink", "yellow")])
        side = rng.randint(20, 26)
        question, answer = "What is the colour of the star?", colour
        excluded = {"pink", "yellow"}
    elif kind == "shape":
        shape = rng.choice(DISTRACTOR_SHAPES)
        side = rng.randint(18, 24)
        question, answer = "What shape is the pink object?", shape
        excluded = {"pink", "yellow"}
    elif kind == "count":
        count = rng.randint(2, 6)
        side = 56
        question, answer = "How many dots are inside the small box with the cyan border?", str(count)
        excluded = {"pink", "yellow", "cyan"}
    else:
        word = rng.choice(WORDS)
        side = 50
        question, answer = "What word is written on the small yellow sign?", word.lower()
        excluded = {"pink", "yellow"}
    height = 20 if kind == "text" else side
    x1, y1 = rng.randint(margin, size - margin - side), rng.randint(margin, size - margin - height)
    box = (x1, y1, x1 + side, y1 + height)

    placed = [box]
    palette = [c for c in COLOURS if c not in excluded]
    for _ in range(distractors):
        for _attempt in range(20):
            d = rng.randint(14, 44)
            dx, dy = rng.randint(0, size - d), rng.randint(0, size - d)
            candidate = (dx, dy, dx + d, dy + d)
            if not _overlaps(candidate, placed, 6):
                placed.append(candidate)
                draw_shape(draw, rng.choice(DISTRACTOR_SHAPES), candidate, COLOURS[rng.choice(palette)])
                break

    if kind == "colour":
        draw_shape(draw, "star", box, COLOURS[answer])
        description = f"a {answer} star"
    elif kind == "shape":
        draw_shape(draw, answer, box, COLOURS["pink"])
        description = f"a pink {answer}"
    elif kind == "count":
        draw.rectangle(box, fill="white", outline=COLOURS["cyan"], width=3)
        spots: list[tuple[int, int]] = []
        while len(spots) < int(answer):
            px, py = rng.randint(box[0] + 10, box[2] - 10), rng.randint(box[1] + 10, box[3] - 10)
            if all(abs(px - qx) > 9 or abs(py - qy) > 9 for qx, qy in spots):
                spots.append((px, py))
        for px, py in spots:
            draw.ellipse((px - 3, py - 3, px + 3, py + 3), fill="black")
        description = f"a box with {answer} dots"
    else:
        draw.rectangle(box, fill=COLOURS["yellow"], outline=(60, 60, 60), width=1)
        font = ImageFont.load_default(size=13)
        text = answer.upper()
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        draw.text((box[0] + (side - (right - left)) / 2 - left, box[1] + (height - (bottom - top)) / 2 - top), text,
                  fill="black", font=font)
        description = f"a yellow sign reading {text}"
    return Scene(image, kind, question, answer, box, description)

"""SAT-style spatial reasoning: relations between objects in a seeded scene, answered with the
exact option text after a ``<think>`` that cites object positions as ``(x, y)``.

Each seed draws 3-6 objects (each a unique colour, so "the red circle" names one object) and asks
one of five SAT-like question types, all with one answer by construction (a margin keeps every
relation clear of ties):

- ``left_right`` / ``above_below``: where object A is relative to object B;
- ``closest``: which of the other objects is nearest to A (the runner-up is 15% farther at least);
- ``larger``: which of two objects is bigger (areas differ by 40% at least);
- ``perspective``: standing at A facing B, is C on your left or right (the angle is 15° at least).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image, ImageDraw
from pydantic import Field
from vista_plugin_judges.choice import format_choices
from vista_plugin_scenekit.shapes import COLOURS, DISTRACTOR_SHAPES, draw_shape
from vista_plugin_vqa.base import Problem

from vista_plugin_grounding.grounded import GroundedConfig, GroundedQAEnv

QuestionType = Literal["left_right", "above_below", "closest", "larger", "perspective"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("left_right", "above_below", "closest", "larger", "perspective")
_OBJECT_COLOURS = ("red", "green", "blue", "orange", "purple", "brown", "black", "pink", "yellow", "cyan")


@dataclass(frozen=True)
class SceneObject:
    name: str
    box: tuple[int, int, int, int]

    @property
    def centre(self) -> tuple[int, int]:
        return (self.box[0] + self.box[2]) // 2, (self.box[1] + self.box[3]) // 2

    @property
    def area(self) -> int:
        return (self.box[2] - self.box[0]) * (self.box[3] - self.box[1])


@dataclass
class SpatialItem:
    image: Image.Image
    objects: list[SceneObject]
    question_type: QuestionType
    question: str
    options: list[str]
    answer_index: int
    involved: list[SceneObject]
    reasoning: str


def _place(rng: random.Random, size: int, count: int) -> list[SceneObject]:
    colours = rng.sample(_OBJECT_COLOURS, count)
    objects: list[SceneObject] = []
    while len(objects) < count:
        side = rng.randint(size // 14, size // 6)
        x, y = rng.randint(8, size - side - 8), rng.randint(8, size - side - 8)
        box = (x, y, x + side, y + side)
        if any(box[0] < o.box[2] + 12 and o.box[0] < box[2] + 12 and box[1] < o.box[3] + 12 and o.box[1] < box[3] + 12
               for o in objects):
            continue
        objects.append(SceneObject(f"{colours[len(objects)]} {rng.choice(DISTRACTOR_SHAPES)}", box))
    return objects


def _at(obj: SceneObject) -> str:
    return f"the {obj.name} at ({obj.centre[0]}, {obj.centre[1]})"


def _binary(rng: random.Random, objects: list[SceneObject], kind: QuestionType, size: int) -> SpatialItem | None:
    a, b = rng.sample(objects, 2)
    axis = 0 if kind == "left_right" else 1
    delta = a.centre[axis] - b.centre[axis]
    if abs(delta) < size // 16:
        return None
    words = ("left", "right") if axis == 0 else ("above", "below")
    answer = words[0] if delta < 0 else words[1]
    name = "x" if axis == 0 else "y"
    relation = "smaller" if delta < 0 else "larger"
    question = (f"Is the {a.name} to the left or to the right of the {b.name}?" if axis == 0
                else f"Is the {a.name} above or below the {b.name}?")
    reasoning = (f"I find {_at(a)} and {_at(b)}. Its {name} is {relation}, so it is {answer} "
                 f"{'of' if axis == 0 else ''} the {b.name}.").replace("  ", " ").replace(" .", ".")
    return SpatialItem(Image.new("RGB", (1, 1)), objects, kind, question, list(words), words.index(answer),
                       [a, b], reasoning)


def _closest(rng: random.Random, objects: list[SceneObject]) -> SpatialItem | None:
    if len(objects) < 4:
        return None
    anchor = rng.choice(objects)
    others = sorted((o for o in objects if o is not anchor), key=lambda o: math.dist(o.centre, anchor.centre))
    best, second = (math.dist(o.centre, anchor.centre) for o in others[:2])
    if second < best * 1.15:
        return None
    options = [f"the {o.name}" for o in others[:3]]
    rng.shuffle(options)
    steps = "; ".join(f"{_at(o)} is {math.dist(o.centre, anchor.centre):.0f} px away" for o in others[:3])
    reasoning = f"The {anchor.name} is at ({anchor.centre[0]}, {anchor.centre[1]}). {steps}. The nearest is the {others[0].name}."
    return SpatialItem(Image.new("RGB", (1, 1)), objects, "closest", f"Which object is closest to the {anchor.name}?",
                       options, options.index(f"the {others[0].name}"), [anchor, *others[:3]], reasoning)


def _larger(rng: random.Random, objects: list[SceneObject]) -> SpatialItem | None:
    a, b = rng.sample(objects, 2)
    big, small = (a, b) if a.area >= b.area else (b, a)
    if big.area < small.area * 1.4:
        return None
    options = [f"the {a.name}", f"the {b.name}"]
    reasoning = (f"{_at(big).capitalize()} spans {big.box[2] - big.box[0]} px; {_at(small)} spans "
                 f"{small.box[2] - small.box[0]} px. The {big.name} is larger.")
    return SpatialItem(Image.new("RGB", (1, 1)), objects, "larger",
                       f"Which object is larger: the {a.name} or the {b.name}?", options,
                       options.index(f"the {big.name}"), [a, b], reasoning)


def _perspective(rng: random.Random, objects: list[SceneObject]) -> SpatialItem | None:
    a, b, c = rng.sample(objects, 3)
    dx, dy = b.centre[0] - a.centre[0], b.centre[1] - a.centre[1]
    vx, vy = c.centre[0] - a.centre[0], c.centre[1] - a.centre[1]
    norm = math.hypot(dx, dy) * math.hypot(vx, vy)
    if norm == 0:
        return None
    cross = (dx * vy - dy * vx) / norm  # image y points down: positive is clockwise, i.e. to the right
    if abs(cross) < math.sin(math.radians(15)):
        return None
    answer = "right" if cross > 0 else "left"
    reasoning = (f"I stand at {_at(a)} and face {_at(b)}. Seen from above, {_at(c)} lies "
                 f"{'clockwise' if cross > 0 else 'counter-clockwise'} of that heading, so it is on my {answer}.")
    return SpatialItem(Image.new("RGB", (1, 1)), objects, "perspective",
                       f"Imagine standing at the {a.name} facing the {b.name}. Is the {c.name} on your left or "
                       f"on your right?", ["left", "right"], ["left", "right"].index(answer), [a, b, c], reasoning)


def generate_item(seed: int, size: int = 384, kinds: tuple[QuestionType, ...] = QUESTION_TYPES) -> SpatialItem:
    """The scene and question for ``seed`` (deterministic); retries layouts until the relation is clear."""
    rng = random.Random(seed)
    kind = rng.choice(list(kinds))
    for _attempt in range(200):
        objects = _place(rng, size, rng.randint(4 if kind == "closest" else 3, 6))
        if kind in ("left_right", "above_below"):
            item = _binary(rng, objects, kind, size)
        elif kind == "closest":
            item = _closest(rng, objects)
        elif kind == "larger":
            item = _larger(rng, objects)
        else:
            item = _perspective(rng, objects)
        if item is not None:
            item.image = render(objects, size, rng)
            return item
    raise RuntimeError(f"no unambiguous {kind} question after 200 layouts (seed {seed})")


def render(objects: list[SceneObject], size: int, rng: random.Random) -> Image.Image:
    background = tuple(rng.randint(225, 250) for _ in range(3))
    image = Image.new("RGB", (size, size), background)  # type: ignore[arg-type]
    draw = ImageDraw.Draw(image)
    for obj in objects:
        colour, shape = obj.name.split(" ", 1)
        draw_shape(draw, shape, obj.box, COLOURS[colour])
    return image


class SpatialConfig(GroundedConfig):
    image_size: int = Field(384, ge=128, le=2048)
    question_types: list[QuestionType] = Field(default_factory=lambda: list(QUESTION_TYPES))
    max_turns: int = Field(2, ge=1, le=50)


class SpatialEnv(GroundedQAEnv):
    config_class = SpatialConfig
    config: SpatialConfig

    def task_instructions(self) -> str:
        return ("Reason about where things are. In <think>, cite the objects you use by their (x, y) pixel "
                "centres, e.g. 'the red circle at (120, 64)'. Then give the exact text of the right option "
                "in <answer>, without a letter.")

    def make_problem(self, seed: int) -> Problem:
        item = generate_item(seed, self.config.image_size, tuple(self.config.question_types))
        question = f"{item.question}\nOptions:\n{format_choices(item.options)}"
        info: dict[str, Any] = {
            "question_type": item.question_type, "options": item.options,
            "objects": [{"name": o.name, "box": list(o.box), "centre": list(o.centre)} for o in item.objects],
            "target_boxes": [list(o.box) for o in item.involved], "oracle_reasoning": item.reasoning}
        return Problem(question, [item.image], item.answer_index, "multiple_choice", {"choices": item.options},
                       oracle_answer=item.options[item.answer_index], info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        from vista_plugin_judges.choice import choice_index

        return choice_index(answer, self.problem.info["options"] if self.problem else None) is not None

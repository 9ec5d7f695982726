"""CountObjectsEnv: a seeded image of N shapes; the agent answers how many there are.

Counting is a classic weak spot of VLMs and a clean RL task: the answer is exact, the oracle is
free, and difficulty is one knob (``max_objects``).  Optional distractors (``target_shape``) turn it
into "count only the circles".  Wrong answers can be retried (``max_attempts``) with feedback, so
the env also exercises multi-turn reflection.

Objects sit in distinct cells of a hidden grid with random size and jitter, so they never overlap
and the count in the picture is always the count in the answer.  Everything is drawn from
``random.Random(seed)``: a seed gives the same pixels on any machine and in any process.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any, Literal

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field, model_validator
from vista_rl import Env, Observation, ResponseFormat, StepResult, parse_response

COLOURS: tuple[tuple[int, int, int], ...] = (
    (220, 40, 40), (40, 170, 60), (40, 80, 220), (240, 150, 20), (150, 60, 190), (20, 20, 20), (0, 160, 170),
)
Shape = Literal["circle", "square", "triangle", "diamond"]
SHAPES: tuple[Shape, ...] = ("circle", "square", "triangle", "diamond")
NUMBER_WORDS = {word: value for value, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
))}
INTEGER = re.compile(r"[-+]?\d+")


class CountObjectsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image_size: int = Field(224, ge=96, le=1024, description="width and height in pixels")
    min_objects: int = Field(1, ge=0, le=20, description="fewest objects to count")
    max_objects: int = Field(9, ge=1, le=20, description="most objects to count")
    target_shape: Shape | None = Field(None, description="count only this shape; others are distractors")
    distractors: int = Field(3, ge=0, le=10, description="shapes of other kinds when target_shape is set")
    max_attempts: int = Field(1, ge=1, le=5, description="answers allowed; wrong ones get feedback")
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    correct_reward: float = 1.0
    attempt_penalty: float = Field(0.0, ge=0.0, le=1.0, description="reward lost per extra attempt")
    format_reward: float = 0.0

    @model_validator(mode="after")
    def _range_is_ordered(self) -> CountObjectsConfig:
        if self.min_objects > self.max_objects:
            raise ValueError(f"min_objects ({self.min_objects}) must not exceed max_objects ({self.max_objects})")
        return self


def read_count(answer: str | None) -> int | None:
    """The count in an answer: ``"7"``, ``"7 objects"`` or ``"seven"``; None if there is none."""
    text = (answer or "").strip().lower()
    if text in NUMBER_WORDS:
        return NUMBER_WORDS[text]
    match = INTEGER.search(text)
    if match is None:
        return None
    try:
        return int(match.group())
    except ValueError:  # more than 4,300 digits: Python refuses to convert it, and it is no count
        return None


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int],
               colour: tuple[int, int, int]) -> None:
    x0, y0, x1, y1 = box
    if shape == "circle":
        draw.ellipse(box, fill=colour)
    elif shape == "square":
        draw.rectangle(box, fill=colour)
    elif shape == "triangle":
        draw.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=colour)
    else:
        cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=colour)


class CountObjectsEnv(Env):
    """Count the objects (or only the ``target_shape`` ones) in a seeded image."""

    def __init__(self, **config: Any) -> None:
        self.config = CountObjectsConfig(**config)
        required = ("think", "answer") if self.config.prompt_format == "free_think" else ("answer",)
        self.response_format = ResponseFormat(required=required)
        self._answer: int | None = None
        self._attempts = 0
        self._done = True

    # ------------------------------------------------------------------ drawing
    def _layout(self, rng: random.Random, count: int, extra: int) -> list[tuple[int, int, int, int]]:
        """``count + extra`` non-overlapping boxes: one per distinct cell of a hidden grid."""
        total = count + extra
        side = max(1, math.ceil(math.sqrt(max(total, self.config.max_objects + extra))))
        cell = self.config.image_size / side
        boxes = []
        for index in rng.sample(range(side * side), total):
            row, col = divmod(index, side)
            size = cell * rng.uniform(0.45, 0.8)
            # a pixel of margin on every side: shapes in neighbouring cells never touch
            x0 = col * cell + rng.uniform(1, cell - size - 2)
            y0 = row * cell + rng.uniform(1, cell - size - 2)
            boxes.append((round(x0), round(y0), round(x0 + size), round(y0 + size)))
        return boxes

    def _draw(self, rng: random.Random) -> tuple[Image.Image, int]:
        count = rng.randint(self.config.min_objects, self.config.max_objects)
        target = self.config.target_shape
        extra = self.config.distractors if target is not None else 0
        if target is None:
            shapes = [rng.choice(SHAPES) for _ in range(count)]
        else:
            others = [shape for shape in SHAPES if shape != target]
            shapes = [target] * count + [rng.choice(others) for _ in range(extra)]
        image = Image.new("RGB", (self.config.image_size, self.config.image_size), (250, 250, 250))
        draw = ImageDraw.Draw(image)
        for shape, box in zip(shapes, self._layout(rng, count, extra), strict=True):
            draw_shape(draw, shape, box, rng.choice(COLOURS))
        return image, count

    # ---------------------------------------------------------------------- api
    def _question(self) -> str:
        target = self.config.target_shape
        return f"How many {target}s are in the image?" if target else "How many objects are in the image?"

    def system_prompt(self) -> str:
        if self.config.prompt_format == "free_think":
            form = "<think>...</think><answer>N</answer>"
            example = "<think>Top row: 2, bottom row: 3, so 5 in all.</think><answer>5</answer>"
        else:
            form, example = "<answer>N</answer>", "<answer>5</answer>"
        what = f"{self.config.target_shape}s (ignore the other shapes)" if self.config.target_shape else "objects"
        attempts = (f" You have {self.config.max_attempts} attempts; a wrong answer gets feedback."
                    if self.config.max_attempts > 1 else "")
        return (f"Count the {what} in the image and answer with a whole number.{attempts}\n"
                f"Format: {form}\nExample: {example}")

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        image, self._answer = self._draw(random.Random(0 if seed is None else seed))
        self._attempts = 0
        self._done = False
        return Observation(f"<image>\n{self._question()}", [image]), {"answer": self._answer}

    def step(self, action: str) -> StepResult:
        if self._done or self._answer is None:
            return StepResult(Observation("The episode is over; call reset()."), 0.0, True, False,
                              {"success": False, "format_ok": False, "action_valid": False})
        self._attempts += 1
        parsed = parse_response(action, self.response_format)
        guess = read_count(parsed.answer) if parsed.answer is not None else None
        valid = guess is not None and guess >= 0
        success = valid and guess == self._answer
        reward = self.config.format_reward if parsed.format_ok else 0.0
        if success:
            reward += self.config.correct_reward * max(0.0, 1.0 - self.config.attempt_penalty * (self._attempts - 1))
        last = success or self._attempts >= self.config.max_attempts
        self._done = last
        info = {"success": success, "format_ok": parsed.format_ok, "action_valid": valid,
                "answer": self._answer, "prediction": guess, "attempts": self._attempts,
                "abs_error": abs(guess - self._answer) if valid and guess is not None else None}
        return StepResult(Observation(self._feedback(parsed.format_ok, parsed.feedback, guess, valid, last)),
                          reward, last, False, info)

    def _feedback(self, format_ok: bool, format_feedback: str, guess: int | None, valid: bool, last: bool) -> str:
        if valid and guess == self._answer:
            return "Correct."
        if not format_ok:
            problem = format_feedback
        elif not valid:
            problem = "Your answer must be a whole number such as 4."
        else:
            problem = f"{guess} is not right."
        if last:
            return f"{problem} The answer was {self._answer}."
        left = self.config.max_attempts - self._attempts
        return f"{problem} Count again carefully ({left} attempt{'s' if left > 1 else ''} left)."

    def oracle_response(self) -> str | None:
        if self._answer is None or self._done:
            return None
        if self.config.prompt_format == "no_think":
            return f"<answer>{self._answer}</answer>"
        what = f"{self.config.target_shape}s" if self.config.target_shape else "objects"
        return f"<think>I count {self._answer} {what}.</think><answer>{self._answer}</answer>"


def count_circles(**config: Any) -> CountObjectsEnv:
    """The harder variant: count only the circles among distractors, two attempts."""
    defaults: dict[str, Any] = {"target_shape": "circle", "distractors": 4, "max_attempts": 2}
    return CountObjectsEnv(**{**defaults, **config})

"""{{ cookiecutter.__item_prefix }}Env: one square among distractor circles; the agent names its colour.

This is the example to replace with your own task.  It shows what every VISTA env does:
- a pydantic config, so a bad key or value fails with a message that names it;
- everything drawn from ``random.Random(seed)`` (never global state or ``hash()``), so a seed gives
  the same pixels on any machine and in any process;
- the model's raw text parsed with the core's parser, so a malformed answer becomes feedback and a
  ``format_ok=False`` metric instead of an exception;
- an oracle response, for scripted baselines, SFT data and the conformance check.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field
from vista_rl import Env, Observation, ResponseFormat, StepResult, parse_response

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "orange": (240, 150, 20),
    "purple": (150, 60, 190),
    "black": (20, 20, 20),
}


class {{ cookiecutter.__item_prefix }}Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image_size: int = Field(160, ge=64, le=1024, description="width and height in pixels")
    distractors: int = Field(3, ge=0, le=5, description="circles drawn besides the square")
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    correct_reward: float = 1.0
    format_reward: float = 0.0


class {{ cookiecutter.__item_prefix }}Env(Env):
    """One-turn visual question with an oracle: what colour is the square?"""

    def __init__(self, **config: Any) -> None:
        self.config = {{ cookiecutter.__item_prefix }}Config(**config)
        required = ("think", "answer") if self.config.prompt_format == "free_think" else ("answer",)
        self.response_format = ResponseFormat(required=required)
        self._answer: str | None = None
        self._done = True

    def _draw(self, rng: random.Random) -> tuple[Image.Image, str]:
        size = self.config.image_size
        names = rng.sample(sorted(COLOURS), self.config.distractors + 1)
        image = Image.new("RGB", (size, size), (250, 250, 250))
        draw = ImageDraw.Draw(image)
        side = size // 5
        for index, name in enumerate(names):
            x, y = rng.randrange(0, size - side), rng.randrange(0, size - side)
            box = (x, y, x + side, y + side)
            if index == 0:
                draw.rectangle(box, fill=COLOURS[name])
            else:
                draw.ellipse(box, fill=COLOURS[name])
        return image, names[0]

    def system_prompt(self) -> str:
        choices = ", ".join(sorted(COLOURS))
        if self.config.prompt_format == "free_think":
            form = "<think>...</think><answer>COLOUR</answer>"
            example = "<think>The shape with corners is blue.</think><answer>blue</answer>"
        else:
            form, example = "<answer>COLOUR</answer>", "<answer>blue</answer>"
        return (
            "The image shows one square and some circles. Name the colour of the square.\n"
            f"Colours: {choices}.\nFormat: {form}\nExample: {example}"
        )

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        image, self._answer = self._draw(random.Random(0 if seed is None else seed))
        self._done = False
        return Observation("<image>\nWhat colour is the square?", [image]), {"answer": self._answer}

    def step(self, action: str) -> StepResult:
        if self._done or self._answer is None:
            return StepResult(Observation("The episode is over; call reset()."), 0.0, True, False,
                              {"success": False, "format_ok": False, "action_valid": False})
        parsed = parse_response(action, self.response_format)
        guess = (parsed.answer or "").strip().lower()
        valid = guess in COLOURS
        success = valid and guess == self._answer
        reward = (self.config.correct_reward if success else 0.0) + (
            self.config.format_reward if parsed.format_ok else 0.0)
        if not parsed.format_ok:
            feedback = parsed.feedback
        elif not valid:
            feedback = f"Answer with one colour name: {', '.join(sorted(COLOURS))}."
        else:
            feedback = "Correct." if success else f"Wrong: the square is {self._answer}."
        self._done = True
        info = {"success": success, "format_ok": parsed.format_ok, "action_valid": valid,
                "answer": self._answer, "prediction": guess or None}
        return StepResult(Observation(feedback), reward, True, False, info)

    def oracle_response(self) -> str | None:
        if self._answer is None or self._done:
            return None
        if self.config.prompt_format == "no_think":
            return f"<answer>{self._answer}</answer>"
        return f"<think>The shape with corners is {self._answer}.</think><answer>{self._answer}</answer>"

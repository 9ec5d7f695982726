"""OddColourEnv: a grid of shapes, all one colour but one; the agent names that cell.

Everything is drawn from ``random.Random(seed)`` (never global state or ``hash()``), so a seed gives
the same pixels on any machine and in any process.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field

from vista_rl import Env, Observation, ResponseFormat, StepResult, parse_response

PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "orange": (240, 150, 20),
    "purple": (150, 60, 190),
    "black": (20, 20, 20),
}
SHAPES = ("circle", "square", "triangle", "diamond")


class OddColourConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grid: int = Field(3, ge=2, le=5, description="cells per side")
    cell_size: int = Field(56, ge=16, le=256, description="pixels per cell")
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    correct_reward: float = 1.0
    format_reward: float = 0.0


class OddColourEnv(Env):
    """One-turn visual task with an oracle: answer the number of the odd-coloured cell."""

    def __init__(self, **config: Any) -> None:
        self.config = OddColourConfig(**config)
        required = ("think", "answer") if self.config.prompt_format == "free_think" else ("answer",)
        self.response_format = ResponseFormat(required=required)
        self._answer: int | None = None
        self._done = True

    # ------------------------------------------------------------------ drawing
    def _draw(self, rng: random.Random) -> tuple[Image.Image, int]:
        cells = self.config.grid * self.config.grid
        base, odd = rng.sample(sorted(PALETTE), 2)
        odd_cell = rng.randrange(cells)
        size = self.config.cell_size
        image = Image.new("RGB", (size * self.config.grid, size * self.config.grid), (250, 250, 250))
        draw = ImageDraw.Draw(image)
        for cell in range(cells):
            row, col = divmod(cell, self.config.grid)
            x0, y0 = col * size, row * size
            draw.rectangle([x0, y0, x0 + size - 1, y0 + size - 1], outline=(200, 200, 200))
            colour = PALETTE[odd if cell == odd_cell else base]
            shape = rng.choice(SHAPES)
            margin = size // 5
            box = (x0 + margin, y0 + margin, x0 + size - margin, y0 + size - margin)
            if shape == "circle":
                draw.ellipse(box, fill=colour)
            elif shape == "square":
                draw.rectangle(box, fill=colour)
            elif shape == "triangle":
                draw.polygon([(box[0], box[3]), ((box[0] + box[2]) // 2, box[1]), (box[2], box[3])], fill=colour)
            else:
                cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
                draw.polygon([(cx, box[1]), (box[2], cy), (cx, box[3]), (box[0], cy)], fill=colour)
        return image, odd_cell + 1

    # ---------------------------------------------------------------------- api
    def system_prompt(self) -> str:
        cells = self.config.grid * self.config.grid
        tags = "<think>...</think><answer>N</answer>" if self.config.prompt_format == "free_think" else "<answer>N</answer>"
        example = "<think>All shapes are red except the one in the middle.</think><answer>5</answer>"
        if self.config.prompt_format == "no_think":
            example = "<answer>5</answer>"
        return (
            f"You see a {self.config.grid}x{self.config.grid} grid of shapes. All shapes share one colour "
            f"except one. Cells are numbered 1 to {cells}, left to right, top to bottom.\n"
            f"Answer with the number of the cell whose shape has the different colour.\n"
            f"Format: {tags}\nExample: {example}"
        )

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        rng = random.Random(0 if seed is None else seed)
        image, self._answer = self._draw(rng)
        self._done = False
        text = "<image>\nWhich cell holds the shape with the odd colour?"
        return Observation(text, [image]), {"answer": self._answer}

    def step(self, action: str) -> StepResult:
        if self._done or self._answer is None:
            return StepResult(Observation("The episode is over; call reset()."), 0.0, True, False,
                              {"success": False, "format_ok": False, "action_valid": False})
        parsed = parse_response(action, self.response_format)
        cells = self.config.grid * self.config.grid
        try:
            guess: int | None = int((parsed.answer or "").strip())
        except ValueError:
            guess = None
        valid = guess is not None and 1 <= guess <= cells
        success = valid and guess == self._answer
        reward = (self.config.correct_reward if success else 0.0) + (
            self.config.format_reward if parsed.format_ok else 0.0)
        if not parsed.format_ok:
            feedback = parsed.feedback
        elif not valid:
            feedback = f"Your answer must be a cell number from 1 to {cells}."
        else:
            feedback = "Correct." if success else f"Wrong: the odd cell was {self._answer}."
        self._done = True
        info = {"success": success, "format_ok": parsed.format_ok, "action_valid": valid,
                "answer": self._answer, "prediction": guess}
        return StepResult(Observation(feedback), reward, True, False, info)

    def oracle_response(self) -> str | None:
        if self._answer is None or self._done:
            return None
        if self.config.prompt_format == "no_think":
            return f"<answer>{self._answer}</answer>"
        return f"<think>The shape in cell {self._answer} has a different colour.</think><answer>{self._answer}</answer>"

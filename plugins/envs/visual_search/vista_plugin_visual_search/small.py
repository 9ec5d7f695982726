"""``visual_search/zoom-small-v0``: a zoom-to-read task small enough for a tiny VLM on a CPU.

Why it exists: the full visual-search env (1536 px scenes, 160 distractors, four target kinds) is far
beyond what a tiny random model can learn in minutes, yet a demo of tool-integrated RL needs a task
where the answer is *provably* not in the shown image and *plainly* in a zoom.  So:

- a ``grid x grid`` layout of frames; at each frame's centre a tiny marker: a dot of one answer
  colour ``c`` inside a square of the complementary colour ``2*grey - c`` (e.g. red in cyan);
- the full-resolution scene is ``factor`` times larger than the view; the view is the box-filtered
  downscale (``Image.reduce``) and every marker is aligned to the ``factor`` blocks with exactly half
  of each block's pixels ``c`` and half ``2*grey - c``, so every marker becomes the background grey:
  **the view is the same image for every seed** and holds no information about any colour;
- the question names the marker by its view coordinate ("What colour is the dot at (28, 84)?"), so
  where to zoom is text, not visual search (a tiny random model cannot learn to localise in minutes);
- ``crop_zoom`` at that coordinate (cut from the full-resolution scene) shows the dot large; answer
  colours and their complements are disjoint sets, so the colours in the crop name the answer.

One trap, measured: the zoom must magnify a block to *more* than one 14-pixel vision patch.  With
``offset`` 4 a block is ``zoom_size / 8`` crop pixels; at ``zoom_size`` 112 that is exactly one patch,
so every patch of the zoom averages to grey as well and a tiny model cannot learn the colour.  The
default ``zoom_size`` 224 makes each block 2x2 patches, the inner ones pure dot colour.

Without tools no policy can beat ``1 / len(colours)`` in expectation (the best constant answer);
the scripted oracle zooms at the target and answers, success 1.0.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image, ImageDraw
from pydantic import Field, field_validator
from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv

from vista_plugin_visual_search.teachers import teacher_marker

#: Answer colours (channels in 1..255 so the complement 256 - c stays a valid byte); no colour's
#: complement is itself an answer colour, so the crop's colours name the answer without asking which
#: one is the dot and which the square around it.
DOT_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (255, 1, 1), "green": (1, 200, 1), "blue": (1, 1, 255), "orange": (255, 128, 1),
}
GREY = 128
BACKGROUND = (GREY, GREY, GREY)
FRAME = (40, 40, 40)


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


@dataclass
class MarkerScene:
    full: Image.Image  # full resolution, display_size * factor
    shown: Image.Image  # the view the model gets
    colours: list[str]  # answer colour of each marker, row by row
    centres: list[tuple[int, int]]  # view coordinates of each marker centre
    target: int  # index of the marker asked about

    @property
    def answer(self) -> str:
        return self.colours[self.target]

    @property
    def point(self) -> tuple[int, int]:
        return self.centres[self.target]


def marker_centres(grid: int, display_size: int) -> list[tuple[int, int]]:
    """View coordinates of the marker centres: the cell centres, rounded to whole view pixels (a
    marker centre must sit on a block corner of the full-resolution scene)."""
    cell = display_size / grid
    return [(round((col + 0.5) * cell), round((row + 0.5) * cell)) for row in range(grid) for col in range(grid)]


def generate_marker_scene(seed: int, grid: int = 2, display_size: int = 112, factor: int = 8,
                          colours: tuple[str, ...] = tuple(DOT_COLOURS), marker: int = 2) -> MarkerScene:
    """The scene of ``seed``: every marker's colour and which one is asked are seeded."""
    rng = random.Random(seed)
    size = display_size * factor
    full = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(full)
    centres = marker_centres(grid, display_size)
    picked = [rng.choice(colours) for _ in centres]
    target = rng.randrange(len(centres))
    mask = marker_mask(factor, marker)
    half = marker // 2
    frame = max(half + 2, round(display_size / grid / 5))  # half side of the frame around a marker (view px)
    for (cx, cy), name in zip(centres, picked, strict=True):
        # A frame (whole view pixels wide, so it looks the same in the view) shows where markers are.
        box = ((cx - frame) * factor, (cy - frame) * factor, (cx + frame) * factor - 1, (cy + frame) * factor - 1)
        draw.rectangle(box, outline=FRAME, width=factor)
        dot, ring = DOT_COLOURS[name], complement(DOT_COLOURS[name])
        left, top = (cx - half) * factor, (cy - half) * factor
        for y, row in enumerate(mask):
            for x, inside in enumerate(row):
                full.putpixel((left + x, top + y), dot if inside else ring)
    shown = full.reduce(factor)  # box filter: each view pixel is the mean of one factor x factor block
    return MarkerScene(full, shown, picked, centres, target)


class SmallZoomConfig(QAEnvConfig):
    prompt_format: Literal["free_think", "no_think"] = "no_think"
    tools: list[str] = Field(default_factory=lambda: ["crop_zoom"],
                             description="[] disables the tool (and drops it from the prompt)")
    max_turns: int = Field(3, ge=1, le=50)
    max_images: int = Field(3, ge=1, le=64)
    grid: int = Field(2, ge=1, le=8, description="markers per side")
    display_size: int = Field(112, ge=28, le=1024, description="side of the view the model gets")
    factor: int = Field(8, ge=2, le=32, description="full resolution / view (the downscale factor)")
    colours: list[str] = Field(default_factory=lambda: list(DOT_COLOURS), min_length=2)
    marker: int = Field(2, ge=2, le=32, description="marker side in view pixels (even)")
    zoom_offset: int = Field(4, ge=4, description="crop_zoom offset (view pixels) the oracle and prompt use")
    zoom_size: int = Field(224, ge=32, le=2048, description="crop_zoom size (pixels) the oracle and prompt use")
    teacher: Literal["oracle", "first_column"] = Field(
        "oracle", description="whose replies oracle_response gives (SFT data): oracle (exact) or first_column "
        "(zooms at the named row's first marker, answers what it sees); vista_plugin_visual_search.teachers")

    @field_validator("marker")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("marker must be even (its centre sits on a view-pixel corner)")
        return value

    @field_validator("colours")
    @classmethod
    def _known_colours(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in DOT_COLOURS]
        if unknown:
            raise ValueError(f"unknown colour(s) {unknown}; choose from {sorted(DOT_COLOURS)}")
        if len(set(value)) != len(value):
            raise ValueError("colours must not repeat")
        return value


class SmallZoomEnv(ToolQAEnv):
    """See the module docstring.  ``tools=[]`` is the tools-disabled variant of the same task."""

    config_class = SmallZoomConfig
    config: SmallZoomConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        if self.config.display_size // self.config.grid < self.config.marker + 6:
            raise ValueError(f"display_size {self.config.display_size} is too small for a {self.config.grid}x"
                             f"{self.config.grid} grid of {self.config.marker}-pixel markers with frames")

    def tool_call_example(self, x: int | str = "X", y: int | str = "Y") -> dict[str, Any]:
        return {"name": "crop_zoom", "arguments": {"coordinate": [x, y], "offset": self.config.zoom_offset,
                                                    "size": self.config.zoom_size}}

    def system_prompt(self) -> str:
        """Short on purpose: every prompt token is paid on every turn of every rollout."""
        size = self.config.display_size
        lines = [f"The image is a {size}x{size} view; its dots are too small to see in it."]
        if "crop_zoom" in self.tools:
            call = json.dumps(self.tool_call_example()).replace('"X"', "x").replace('"Y"', "y")
            lines.append(f"Zoom in at the dot first: <tool_call>{call}</tool_call>")
        lines.append(f"Answer with its colour ({', '.join(self.config.colours)}) as <answer>colour</answer>.")
        return "\n".join(lines)

    def make_problem(self, seed: int) -> Problem:
        scene = generate_marker_scene(seed, self.config.grid, self.config.display_size, self.config.factor,
                                      tuple(self.config.colours), self.config.marker)
        x, y = scene.point
        # The teacher's zoom and answer (issue 38): the named marker for the oracle, another for a flawed one.
        looked = teacher_marker(self.config.teacher, scene.target, self.config.grid)
        tx, ty = scene.centres[looked]
        seen = scene.colours[looked]
        info = {"target_point": [x, y], "target_index": scene.target, "marker_colours": list(scene.colours),
                "teacher_point": [tx, ty], "oracle_reasoning": f"The zoom at ({tx}, {ty}) shows a {seen} dot."}
        return Problem(f"What colour is the dot at ({x}, {y})?", [scene.shown], scene.answer, "exact",
                       oracle_answer=seen, full_resolution={0: scene.full}, info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        return answer.strip().lower().rstrip(".") in self.config.colours

    def oracle_tool_call(self) -> dict[str, Any] | None:
        assert self.problem is not None
        x, y = self.problem.info["teacher_point"]
        return {**self.tool_call_example(x, y), "think": f"The dot at ({x}, {y}) is too small; I zoom there."}

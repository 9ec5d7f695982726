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

from PIL import Image
from pydantic import Field
from vista_plugin_scenekit.fields import (
    DisplaySize,
    DotColourNames,
    Factor,
    GridSide,
    MarkerSide,
    default_dot_colours,
)
from vista_plugin_scenekit.markers import (
    BACKGROUND,
    DOT_COLOURS,
    check_marker_grid,
    draw_framed_marker,
    frame_half_side,
    marker_centres,
)
from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv

from vista_plugin_visual_search.teachers import teacher_marker


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


def generate_marker_scene(seed: int, grid: int = 2, display_size: int = 112, factor: int = 8,
                          colours: tuple[str, ...] = tuple(DOT_COLOURS), marker: int = 2) -> MarkerScene:
    """The scene of ``seed``: every marker's colour and which one is asked are seeded."""
    rng = random.Random(seed)
    size = display_size * factor
    full = Image.new("RGB", (size, size), BACKGROUND)
    centres = marker_centres(grid, display_size)
    picked = [rng.choice(colours) for _ in centres]
    target = rng.randrange(len(centres))
    half_side = frame_half_side(grid, display_size, marker)
    for centre, name in zip(centres, picked, strict=True):
        draw_framed_marker(full, centre, name, factor=factor, marker=marker, half_side=half_side)
    shown = full.reduce(factor)  # box filter: each view pixel is the mean of one factor x factor block
    return MarkerScene(full, shown, picked, centres, target)


class SmallZoomConfig(QAEnvConfig):
    prompt_format: Literal["free_think", "no_think"] = "no_think"
    tools: list[str] = Field(default_factory=lambda: ["crop_zoom"],
                             description="[] disables the tool (and drops it from the prompt)")
    max_turns: int = Field(3, ge=1, le=50)
    max_images: int = Field(3, ge=1, le=64)
    # The marker layout: fields typed once in vista_plugin_scenekit.fields (shared with grounding/zoom-spot-v0).
    grid: GridSide = Field(2, description="markers per side")
    display_size: DisplaySize = 112
    factor: Factor = 8
    colours: DotColourNames = Field(default_factory=default_dot_colours)
    marker: MarkerSide = 2
    zoom_offset: int = Field(4, ge=4, description="crop_zoom offset (view pixels) the oracle and prompt use")
    zoom_size: int = Field(224, ge=32, le=2048, description="crop_zoom size (pixels) the oracle and prompt use")
    teacher: Literal["oracle", "first_column", "coin_column"] = Field(
        "oracle", description="whose replies oracle_response gives (SFT data): oracle (exact), first_column "
        "(zooms at the named row's first marker, answers what it sees) or coin_column (zooms in the named row "
        "at a column a CRC-32 coin of the scene picks, answers what it sees); vista_plugin_visual_search.teachers")


class SmallZoomEnv(ToolQAEnv):
    """See the module docstring.  ``tools=[]`` is the tools-disabled variant of the same task."""

    config_class = SmallZoomConfig
    config: SmallZoomConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        check_marker_grid(self.config.grid, self.config.display_size, self.config.marker)

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
        looked = teacher_marker(self.config.teacher, scene.target, self.config.grid, scene.colours)
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

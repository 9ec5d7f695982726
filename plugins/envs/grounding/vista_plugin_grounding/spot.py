"""``grounding/zoom-spot-v0``: ViGoRL's grounded zoom, small enough for a tiny VLM on a CPU.

Why it exists: ViGoRL's point is that the model *grounds* its reasoning: it names a place in the
image as ``(x, y)``, zooms there (``search_coordinate``) and reads what it could not read before.
The GUI and V* tasks need that at 1000+ pixels with a 3B model; this task keeps the three steps and
nothing else, so a tiny random Qwen2.5-VL learns them in minutes:

- a ``display_size`` view (default 28x28) with ``grid x grid`` candidate places; one of them, chosen
  by the seed, holds a **visible frame** (a dark square outline, whole view pixels wide) with a tiny
  marker at its centre: a dot of one answer colour inside a square of its complementary colour
  (``vista_plugin_scenekit.markers``, the marker of ``visual_search/zoom-small-v0`` too), every
  ``factor x factor`` block half and half, so the box-filtered view shows the marker as the
  background grey: **where** is visible, **what** is not;
- the question is the same for every seed ("What colour is the dot inside the frame?"), so the place
  must come from the image: the model cites it in ``<think>`` and calls ``search_coordinate`` there;
- the crop is cut from the full-resolution scene (``factor`` times larger), where the dot is plain.
  A zoom at another place shows background only.

Why 28x28: a tiny Qwen2.5-VL has no absolute position embedding (rotary only), so "which of 16
vision tokens holds the frame" is hard for it to turn into coordinates (docs/main-job.md found the
same for map reading); a 28x28 view is one merged vision token (with ``min_pixels=28*28``), whose
embedding holds the layout of its pixels directly.  The zoom (``search_coordinate`` with offset 1,
crop 112: the marker's 2x2 view pixels) comes back as 16 tokens, nearly all dot.

Reward: ViGoRL's multi-turn grounded reward (:mod:`vista_plugin_grounding.grounded`),
``0.6·acc + 0.4·format`` with ``format = 1 + 0.2·(unique points − 1)``.  ``info["grounded"]`` says
whether a cited point lies inside the frame.

Without the zoom no policy beats ``1 / len(colours)`` in expectation (the view is the same grey at
the marker for every colour); the scripted oracle cites the frame's centre, zooms there and answers.
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
    frame_box,
    frame_half_side,
    marker_centres,
)
from vista_plugin_vqa.base import Problem

from vista_plugin_grounding.grounded import GroundedConfig, GroundedQAEnv, GroundingReward
from vista_plugin_grounding.teachers import teacher_place

QUESTION = "What colour is the dot inside the frame?"


class SpotConfig(GroundedConfig):
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    grounding_reward: GroundingReward = "multi_turn"
    tools: list[str] = Field(default_factory=lambda: ["search_coordinate"],
                             description="zoom tools ([] drops the zoom from the env and prompt)")
    max_turns: int = Field(3, ge=1, le=50)
    max_images: int = Field(3, ge=1, le=64)
    # The marker layout: fields typed once in vista_plugin_scenekit.fields (shared with zoom-small-v0).
    grid: GridSide = Field(3, description="candidate places per side")
    display_size: DisplaySize = 28
    factor: Factor = 8
    colours: DotColourNames = Field(default_factory=default_dot_colours)
    marker: MarkerSide = 2
    oracle_confusion: float = Field(0.0, ge=0.0, le=1.0, description=(
        "the SFT teacher's systematic grounding error: on this share of seeds (fixed per seed) whose frame is "
        "not in the first column, the oracle cites and zooms at the place one column to the left, then "
        "answers the true colour (right answer, wrong grounding); rollouts and evals never call the oracle"))
    teacher: Literal["oracle", "off_right", "coin_right"] = Field(
        "oracle", description="whose chains oracle_response gives (SFT data): oracle (exact) or off_right (cites "
        "right-column frames one cell to the left, then guesses) or coin_right (the same on 70% of seeds); "
        "vista_plugin_grounding.teachers")


@dataclass
class SpotScene:
    full: Image.Image  # full resolution: display_size * factor
    shown: Image.Image  # the view the model gets
    colour: str  # the dot's answer colour
    point: tuple[int, int]  # the frame's centre, view pixels
    frame: tuple[int, int, int, int]  # the frame's box, view pixels (inclusive)
    places: list[tuple[int, int]]  # every candidate place, view pixels


def generate_spot_scene(seed: int, grid: int = 3, display_size: int = 28, factor: int = 8,
                        colours: tuple[str, ...] = tuple(DOT_COLOURS), marker: int = 2) -> SpotScene:
    """The scene of ``seed``: which place holds the frame and the dot's colour are seeded."""
    rng = random.Random(seed)
    places = marker_centres(grid, display_size)
    point = places[rng.randrange(len(places))]
    colour = rng.choice(colours)
    full = Image.new("RGB", (display_size * factor, display_size * factor), BACKGROUND)
    half_side = frame_half_side(grid, display_size, marker)
    draw_framed_marker(full, point, colour, factor=factor, marker=marker, half_side=half_side)
    return SpotScene(full, full.reduce(factor), colour, point, frame_box(point, half_side), places)


class SpotZoomEnv(GroundedQAEnv):
    """See the module docstring.  ``tools=[]`` is the zoom-less variant of the same task (the
    demo's zoom ablation instead keeps the tool and makes it refuse: ``search_coordinate`` with
    ``disabled: true``)."""

    config_class = SpotConfig
    config: SpotConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        check_marker_grid(self.config.grid, self.config.display_size, self.config.marker)

    def system_prompt(self) -> str:
        """Short on purpose: every prompt token is paid on every turn of every rollout."""
        size = self.config.display_size
        lines = [f"A {size}x{size} view; the dot in the frame is too small to see."]
        colours = ", ".join(self.config.colours)
        if self.tools:
            call = json.dumps({"name": self.tools[0], "arguments": {"coordinate": ["x", "y"]}})
            call = call.replace('"x"', "x").replace('"y"', "y")
            lines.append(f"Find the frame, zoom there: <think>The frame is at (x, y).</think><tool_call>{call}</tool_call>")
        lines.append(f"Then answer its colour ({colours}): <think>...</think><answer>colour</answer>")
        return "\n".join(lines)

    def make_problem(self, seed: int) -> Problem:
        config = self.config
        scene = generate_spot_scene(seed, config.grid, config.display_size, config.factor, tuple(config.colours),
                                    config.marker)
        x, y = scene.point
        cited = self.teacher_point(seed, scene.point)
        # A flawed teacher (issue 38) that zoomed off the frame saw no dot: it guesses the first colour.
        answer, reason = scene.colour, f"The zoom shows a {scene.colour} dot."
        if self.config.teacher != "oracle" and cited != scene.point:
            answer, reason = config.colours[0], f"The zoom shows no dot; I guess {config.colours[0]}."
        info = {"target_point": [x, y], "teacher_point": list(cited),
                "target_boxes": [list(scene.frame)], "dot_colour": scene.colour, "oracle_reasoning": reason}
        return Problem(QUESTION, [scene.shown], scene.colour, "exact", oracle_answer=answer,
                       full_resolution={0: scene.full}, info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        return answer.strip().lower().rstrip(".") in self.config.colours

    def teacher_point(self, seed: int, point: tuple[int, int]) -> tuple[int, int]:
        """Where the oracle cites and zooms: the frame's centre, or with ``oracle_confusion`` the place one
        column to the left (ViGoRL's teacher chains pass an answer-correctness filter, not a grounding one,
        so chains whose point is off but whose answer is right are SFT data too)."""
        places = marker_centres(self.config.grid, self.config.display_size)
        if self.config.teacher != "oracle":
            return places[teacher_place(self.config.teacher, places.index(point), self.config.grid, seed)]
        column = places.index(point) % self.config.grid
        if column == 0 or random.Random(seed * 7919 + 13).random() >= self.config.oracle_confusion:
            return point
        return places[places.index(point) - 1]

    def oracle_tool_call(self) -> dict[str, Any] | None:
        assert self.problem is not None
        x, y = self.problem.info["teacher_point"]
        return {"name": self.tools[0] if self.tools else "search_coordinate", "arguments": {"coordinate": [x, y]},
                "think": f"The frame is at ({x}, {y})."}

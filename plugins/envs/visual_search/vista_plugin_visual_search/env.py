"""V*-style visual search env (ViGoRL multi-turn).

The model sees the 1536x1536 scene downscaled (512x512 by default), in which the target's attribute
is not legible.  It reasons with ``(x, y)`` points in ``<think>`` and zooms with ``crop_zoom`` (which
cuts from the full-resolution original; coordinates are in the shown image's pixels), then answers.
Reward: the answer reward (with the answer-attempt factor) plus a grounding reward scaled by the
share of the distinct points the model named (in ``<think>`` or a tool call) that fall inside the
target's box, so naming many places earns less, not more.  Images and turns are
capped as in ViGoRL (5 images, full view + crops).
"""

from __future__ import annotations

import re
from typing import Any

from PIL import Image
from pydantic import Field
from vista_plugin_judges.boxes import point_in_box
from vista_plugin_judges.points import unique_points
from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv

from vista_plugin_visual_search.scene import (
    COLOURS,
    DISTRACTOR_SHAPES,
    TARGET_KINDS,
    TargetKind,
    generate_scene,
)
from vista_rl import ParsedResponse

#: Two named points closer than this (shown pixels) are one place, as in ViGoRL's unique-point rule.
DISTINCT_PLACE_PX = 10.0
POINT_RE = re.compile(r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")


class VisualSearchConfig(QAEnvConfig):
    tools: list[str] = Field(default_factory=lambda: ["crop_zoom"])
    max_turns: int = Field(5, ge=1, le=50)
    max_images: int = Field(5, ge=1, le=64)
    scene_size: int = Field(1536, ge=256, le=4096)
    display_size: int = Field(512, ge=64, le=4096, description="side of the first image the model sees")
    distractors: int = Field(160, ge=0, le=2000)
    target_kinds: list[TargetKind] = Field(default_factory=lambda: list(TARGET_KINDS))
    grounding_reward: float = Field(0.5, ge=0.0, description="added when a named point hits the target")
    grounding_margin: int = Field(8, ge=0, description="full-resolution pixels around the target box")
    zoom_offset: int = Field(24, ge=4, description="crop_zoom offset the oracle uses (shown pixels)")


def points_in(text: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in POINT_RE.findall(text[:20_000])]


class VisualSearchEnv(ToolQAEnv):
    config_class = VisualSearchConfig
    config: VisualSearchConfig

    @property
    def scale(self) -> float:
        return self.config.scene_size / self.config.display_size

    def task_instructions(self) -> str:
        size = self.config.display_size
        return (f"The image is a {size}x{size} downscaled view of a large scene; small things are not legible "
                f"in it. Think step by step and name the places you look at as (x, y) pixel coordinates of "
                f"this view. To look closer call crop_zoom with a coordinate (and an offset of about "
                f"{self.config.zoom_offset} pixels); it returns a sharp enlarged crop of the full-resolution "
                f"scene. Each turn: one <think>, then either one <tool_call> or the <answer>. Answer with one "
                f"word or number.")

    def make_problem(self, seed: int) -> Problem:
        scene = generate_scene(seed, self.config.scene_size, self.config.distractors, tuple(self.config.target_kinds))
        shown = scene.image.resize((self.config.display_size,) * 2, Image.Resampling.LANCZOS)
        cx, cy = (round(v / self.scale) for v in scene.target_centre)
        info = {"target_kind": scene.kind, "target_box": list(scene.target_box), "target_point": [cx, cy],
                "oracle_reasoning": f"Zooming at ({cx}, {cy}) shows {scene.description}, so the answer is "
                                    f"{scene.answer}."}
        question = f"{scene.question} (This view is {self.config.display_size}x{self.config.display_size} pixels.)"
        return Problem(question, [shown], scene.answer, "exact", oracle_answer=scene.answer,
                       full_resolution={0: scene.image}, info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        kind = self.problem.info["target_kind"] if self.problem else None
        value = answer.strip().lower().rstrip(".")
        if kind == "colour":
            return value in COLOURS
        if kind == "shape":
            return value in DISTRACTOR_SHAPES
        if kind == "count":
            return value.isdigit()
        return value.isalpha() and len(value) <= 12

    def named_points(self) -> list[tuple[float, float]]:
        """Every (x, y) the model named so far: in <think> text and in tool-call coordinates."""
        points: list[tuple[float, float]] = []
        for parsed in self.responses:
            for think in parsed.fields.get("think", []):
                points.extend(points_in(think))
        points.extend(self.call_coordinates())
        return points

    def extra_reward(self, parsed: ParsedResponse, final: bool) -> tuple[float, dict[str, Any]]:
        """``grounding_reward`` times the share of the distinct places the model named that are on
        the target.  Paying for *any* hit would pay a reply that names a grid of points over the whole
        image; paying for precision pays only a model that knows where the target is."""
        assert self.problem is not None
        box = self.problem.info["target_box"]
        named = unique_points(self.named_points(), DISTINCT_PLACE_PX)
        hits = [p for p in named
                if point_in_box((p[0] * self.scale, p[1] * self.scale), box, self.config.grounding_margin)]
        precision = len(hits) / len(named) if named else 0.0
        return self.config.grounding_reward * precision, {
            "grounded": bool(hits), "grounding_precision": precision, "points_named": len(named),
            "zooms": len(self.tool_calls)}

    def oracle_tool_call(self) -> dict[str, Any] | None:
        assert self.problem is not None
        x, y = self.problem.info["target_point"]
        return {"name": "crop_zoom", "arguments": {"coordinate": [x, y], "offset": self.config.zoom_offset},
                "think": f"The question's target might be the small thing near ({x}, {y}); I will zoom there."}

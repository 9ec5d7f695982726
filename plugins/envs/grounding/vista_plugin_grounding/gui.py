"""ScreenSpot-style GUI grounding: an instruction names one widget; the answer is a point
``<answer> (x, y) </answer>``, correct when it lies inside the widget's box (point-in-box).

``grounding/gui-v0`` draws a seeded application window (:func:`vista_plugin_grounding.page.app_window`);
``grounding/screenspot-v0`` serves ScreenSpot v1/v2/Pro records (``answer`` = the target box
``[x1, y1, x2, y2]`` in original pixels), shown downscaled to ``max_side`` when larger; answers are in
shown pixels and scaled back for judging, and zoom crops come from the original.

Zoom: the tools in ``tools`` (default ``crop_zoom`` from vista-plugin-tools; ViGoRL's
``search_coordinate`` once vista-plugin-vigorl provides it) take a ``coordinate`` in shown pixels.
"""

from __future__ import annotations

from typing import Any

from PIL import Image
from pydantic import Field
from vista_plugin_vqa.base import Problem
from vista_plugin_vqa.records import RecordSource, load_images, load_records

from vista_plugin_grounding.coords import parse_point
from vista_plugin_grounding.grounded import GroundedConfig, GroundedQAEnv, GroundingReward
from vista_plugin_grounding.page import app_window

GROUNDING_INSTRUCTIONS = (
    "This is a screenshot. Find the element the instruction refers to. In <think>, name the places you "
    "look at as (x, y) pixel coordinates of the screenshot. Answer with the point to click, as "
    "<answer> (x, y) </answer>.")


class GuiConfig(GroundedConfig):
    tools: list[str] = Field(default_factory=lambda: ["crop_zoom"], description="zoom tools ([] for none)")
    grounding_reward: GroundingReward = "multi_turn"
    max_turns: int = Field(5, ge=1, le=50)
    max_images: int = Field(5, ge=1, le=64)
    width: int = Field(960, ge=320, le=4096)
    height: int = Field(600, ge=240, le=4096)
    zoom_offset: int = Field(50, ge=4, description="half-window of the oracle's zoom (ViGoRL web: 50)")


class _PointEnv(GroundedQAEnv):
    config: GuiConfig

    def task_instructions(self) -> str:
        zoom = (f" To look closer, call {self.tools[0]} with a coordinate; it returns an enlarged crop around it."
                if self.tools else "")
        return GROUNDING_INSTRUCTIONS + zoom

    def answer_is_plausible(self, answer: str) -> bool:
        return parse_point(answer) is not None

    def oracle_tool_call(self) -> dict[str, Any] | None:
        assert self.problem is not None
        x, y = self.problem.info["target_point"]
        arguments: dict[str, Any] = {"coordinate": [x, y]}
        if self.tools and self.tools[0] == "crop_zoom":
            arguments["offset"] = self.config.zoom_offset
        return {"name": self.tools[0] if self.tools else "crop_zoom", "arguments": arguments,
                "think": f"The element should be near ({x}, {y}); I will zoom there to check."}


class GuiGroundingEnv(_PointEnv):
    config_class = GuiConfig

    def make_problem(self, seed: int) -> Problem:
        screen = app_window(seed, self.config.width, self.config.height)
        import random

        target = random.Random(seed * 7919 + 1).choice(screen.widgets)
        x, y = target.centre
        info = {"target_kind": target.kind, "target_label": target.label, "target_box": list(target.box),
                "target_boxes": [list(target.box)], "target_point": [x, y],
                "data_type": "icon" if target.kind == "icon" else "text",
                "oracle_reasoning": f"The instruction asks for {target.describe()}; I see it at ({x}, {y})."}
        return Problem(f"Instruction: click {target.describe()}.", [screen.image], list(target.box), "point_in_box",
                       oracle_answer=f"({x}, {y})", info=info)


class ScreenSpotConfig(GuiConfig, RecordSource):
    max_side: int | None = Field(1280, ge=64, description="downscale screenshots whose longer side is larger")


class ScreenSpotEnv(_PointEnv):
    """ScreenSpot records (see :mod:`vista_plugin_grounding.adapters`) as a grounding env."""

    config_class = ScreenSpotConfig
    config: ScreenSpotConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.records = load_records(self.config)  # type: ignore[arg-type]

    def make_problem(self, seed: int) -> Problem:
        record = self.records[seed % len(self.records)]
        (original,) = load_images(record)[:1]
        box = [float(v) for v in record.answer]
        factor = 1.0
        shown = original
        if self.config.max_side and max(original.size) > self.config.max_side:
            factor = max(original.size) / self.config.max_side
            shown = original.resize((round(original.width / factor), round(original.height / factor)),
                                    Image.Resampling.LANCZOS)
        x, y = round((box[0] + box[2]) / 2 / factor), round((box[1] + box[3]) / 2 / factor)
        shown_box = [v / factor for v in box]
        info = {"record_id": record.id, "dataset": record.dataset, "target_box": box, "target_boxes": [shown_box],
                "target_point": [x, y], "scale": factor, **{k: record.metadata.get(k) for k in
                                                             ("data_type", "platform", "application")}}
        return Problem(f"Instruction: {record.question}", [shown], box, "point_in_box", {"scale": factor},
                       oracle_answer=f"({x}, {y})", full_resolution={0: original} if factor != 1.0 else {},
                       info=info)

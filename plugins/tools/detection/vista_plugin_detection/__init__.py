"""Perception tools for VISTA: open-vocabulary grounding and VLM-as-tool.

Import-light: torch and transformers load only when a tool first runs.
"""

from __future__ import annotations

import vista_rl

TOOLS: dict[str, tuple[str, str]] = {
    "detection/grounding-dino": (
        "grounding:GroundingTool",
        "Text query -> boxes, scores, phrases (GroundingDINO/OWLv2 via transformers; model=NAME|PATH)"),
    "detection/vlm": (
        "vlm_tool:VLMTool",
        "Any registered model backend as a tool, with prompt templates (backend=..., backend_config={...})"),
    "detection/chart-to-table": (
        "vlm_tool:ChartToTableTool",
        "VLM-as-tool preset: chart image -> data table (ChartMoE-style to_table/describe/answer)"),
    "detection/describe-region": (
        "vlm_tool:DescribeRegionTool",
        "VLM-as-tool preset: describe a box [x1, y1, x2, y2] of an image"),
}


@vista_rl.hookimpl
def register_tools(register: vista_rl.RegisterTool) -> None:
    for tool_id, (target, description) in TOOLS.items():
        register(tool_id, f"vista_plugin_detection.{target}", description=description)

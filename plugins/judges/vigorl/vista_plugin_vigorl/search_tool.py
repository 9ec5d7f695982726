"""ViGoRL's ``search_coordinate`` tool: the model names one point, gets back a fixed-size crop around it.

Same zoom as ``crop_zoom`` (``vista_plugin_tools.crop.point_crop``), with ViGoRL's contract: the
only argument is ``coordinate`` (two integers, pixels of the image as the model saw it), the crop is
always cut from the ORIGINAL image (image 0, never an earlier crop, so errors do not compound), and
the output is exactly ``crop_size x crop_size`` whatever the window's shape near an edge.

Presets (``preset=``): ``vstar`` (offset 182, 672 px, no dot), ``web`` (offset 50, 384 px, red
dot), ``default`` (offset 50, 512 px, no dot: ViGoRL's script defaults).

``disabled=True`` makes the tool refuse every call (a text, no image): the zoom ablation of a run,
with the env and its prompt unchanged, so the only difference from the real run is what the zoom
shows (scripts/demo_grounded.py uses it through ``rollout.tools``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from vista_plugin_tools.base import ImageTool, clamp_point, fmt, pick_image
from vista_plugin_tools.crop import point_crop

from vista_rl import ToolContext, ToolResult

PRESETS: dict[str, tuple[int, int, bool]] = {
    "vstar": (182, 672, False),
    "web": (50, 384, True),
    "default": (50, 512, False),
}


class SearchCoordinateTool(ImageTool):
    name = "search_coordinate"
    description = ("Zoom in on a point: returns a crop of the original image centred on coordinate "
                   "[x, y] (integer pixels of the image you were shown).  Do not repeat a coordinate.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        coordinate: Annotated[list[int], Field(min_length=2, max_length=2)] = Field(
            description="[x, y] in pixels of the original image")

    def __init__(self, preset: Literal["vstar", "web", "default"] | None = None, offset: int | None = None,
                 crop_size: int | None = None, draw_dot: bool | None = None, disabled: bool = False) -> None:
        base_offset, base_size, base_dot = PRESETS[preset or "default"]
        self.offset = base_offset if offset is None else offset
        self.crop_size = base_size if crop_size is None else crop_size
        self.draw_dot = base_dot if draw_dot is None else draw_dot
        self.disabled = disabled
        if self.offset < 1 or self.crop_size < 8:
            raise ValueError("search_coordinate needs offset >= 1 and crop_size >= 8")

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        if self.disabled:
            return ToolResult("The zoom is disabled; no crop.")
        picked = pick_image(context, 0)
        width, height = picked.shown.size
        x, y, clamped = clamp_point(float(arguments.coordinate[0]), float(arguments.coordinate[1]), width, height)
        crop, box = point_crop(picked, x, y, self.offset, self.crop_size, square=True, draw_dot=self.draw_dot)
        text = "Here is the crop of the image centered on the coordinate"
        text += ", with a red dot at the coordinate location:" if self.draw_dot else ":"
        if clamped:
            px, py = arguments.coordinate
            text += (f" (the point ({px}, {py}) was outside the {width}x{height} image and was clamped to "
                     f"({fmt(x)}, {fmt(y)}))")
        return self.image_result(text, crop, context, region=list(box), point=[x, y], clamped=clamped)

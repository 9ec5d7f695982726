"""Drawing tools: a labelled coordinate grid (so the model can name pixels precisely, as grounded
reasoning asks) and marks (points and boxes) to check a hypothesis visually."""

from __future__ import annotations

from typing import Annotated

from PIL import ImageDraw, ImageFont
from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools.base import ImageTool, ToolInputError, as_rgb, clamp_box, clamp_point, fmt, pick_image
from vista_rl import ToolContext, ToolResult

IMAGE_FIELD = Field(-1, description="which image: 0 is the original, -1 the latest")
COLOURS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240)]


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


class GridOverlayTool(ImageTool):
    name = "grid_overlay"
    description = ("Draw a grid with pixel-coordinate labels every `step` pixels (default: 8 cells "
                   "across) so you can read positions off the image.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        step: int | None = Field(None, ge=8, le=4096, description="grid spacing in pixels")
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        out = as_rgb(picked.shown).copy()
        width, height = out.size
        step = arguments.step or max(8, round(max(width, height) / 8))
        draw = ImageDraw.Draw(out)
        label_font = font(max(10, min(24, step // 4)))
        lines = 0
        for x in range(0, width, step):
            draw.line([(x, 0), (x, height)], fill=(255, 0, 0), width=1)
            draw.text((x + 2, 2), str(x), fill=(255, 0, 0), font=label_font, stroke_width=2, stroke_fill="white")
            lines += 1
        for y in range(0, height, step):
            draw.line([(0, y), (width, y)], fill=(0, 0, 255), width=1)
            draw.text((2, y + 2), str(y), fill=(0, 0, 255), font=label_font, stroke_width=2, stroke_fill="white")
            lines += 1
        return self.image_result(f"Image {picked.index} ({width}x{height}) with a grid every {step} pixels "
                                 "(x labels red along the top, y labels blue down the left).", out, context,
                                 step=step, lines=lines)


class MarkTool(ImageTool):
    name = "mark"
    description = "Draw numbered points [x, y] and boxes [x1, y1, x2, y2] on an image."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        points: list[Annotated[list[float], Field(min_length=2, max_length=2)]] = Field(default_factory=list)
        boxes: list[Annotated[list[float], Field(min_length=4, max_length=4)]] = Field(default_factory=list)
        labels: list[str] = Field(default_factory=list, description="optional labels, points first, then boxes")
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        if not arguments.points and not arguments.boxes:
            raise ToolInputError("give at least one point or box to mark")
        if len(arguments.points) + len(arguments.boxes) > 64:
            raise ToolInputError("at most 64 marks per call")
        picked = pick_image(context, arguments.image)
        out = as_rgb(picked.shown).copy()
        width, height = out.size
        draw = ImageDraw.Draw(out)
        radius = max(3, round(max(width, height) / 100))
        label_font = font(max(10, radius * 3))
        notes: list[str] = []
        for number, (px, py) in enumerate(arguments.points):
            x, y, clamped = clamp_point(px, py, width, height)
            if clamped:
                notes.append(f"point ({fmt(px)}, {fmt(py)}) clamped to ({fmt(x)}, {fmt(y)})")
            colour = COLOURS[number % len(COLOURS)]
            draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=colour, outline="white", width=2)
            label = arguments.labels[number] if number < len(arguments.labels) else str(number + 1)
            draw.text((x + radius + 2, y - radius), label[:40], fill=colour, font=label_font,
                      stroke_width=2, stroke_fill="white")
        for offset, raw in enumerate(arguments.boxes):
            number = len(arguments.points) + offset
            box, clamped = clamp_box(raw, width, height)
            if clamped:
                notes.append(f"box [{', '.join(fmt(v) for v in raw)}] clamped to [{', '.join(fmt(v) for v in box)}]")
            colour = COLOURS[number % len(COLOURS)]
            draw.rectangle(box, outline=colour, width=max(2, radius // 2))
            label = arguments.labels[number] if number < len(arguments.labels) else str(number + 1)
            draw.text((box[0] + 2, box[1] + 2), label[:40], fill=colour, font=label_font,
                      stroke_width=2, stroke_fill="white")
        text = (f"Image {picked.index} with {len(arguments.points)} point(s) and {len(arguments.boxes)} "
                "box(es) marked.")
        if notes:
            text += " Note: outside the image, so clamped: " + "; ".join(notes) + "."
        return self.image_result(text, out, context, clamped=bool(notes))

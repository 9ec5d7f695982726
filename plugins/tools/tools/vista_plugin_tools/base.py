"""Shared pieces of the image tools: picking an image from the episode, clamping coordinates (and
saying so), and turning input mistakes into clear error results.

Images are numbered as the model saw them: 0 is the first observation's first image, every image a
tool returned gets the next number.  Negative numbers count from the latest (-1).  When the env shows
a downscaled image it can put the full-resolution one in ``context.metadata["full_resolution"]``
(``{index: PIL image}``); crops then cut from it, with coordinates still in the shown image's pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vista_rl import IMAGE_PLACEHOLDER, Tool, ToolContext, ToolResult

FULL_RESOLUTION_KEY = "full_resolution"
MAX_SIDE = 4096  # no tool output larger than this per side


class ToolInputError(ValueError):
    """A mistake in the call the model can fix; its message goes back to the model verbatim."""


def sanitize(text: str) -> str:
    """Tool text must never contain an image placeholder (it would shift every image slot)."""
    return text.replace(IMAGE_PLACEHOLDER, "<image >")


@dataclass
class PickedImage:
    index: int  # non-negative index in context.images
    shown: Image.Image  # the image as the model saw it
    source: Image.Image  # full resolution when the env provided one, else ``shown``

    @property
    def scale(self) -> tuple[float, float]:
        return self.source.width / self.shown.width, self.source.height / self.shown.height


def pick_image(context: ToolContext, index: int) -> PickedImage:
    count = len(context.images)
    if count == 0:
        raise ToolInputError("there is no image in this episode to work on")
    if not -count <= index < count:
        raise ToolInputError(f"image {index} does not exist; images are numbered 0 to {count - 1} "
                             f"(or -1 for the latest)")
    resolved = index % count
    shown = context.images[resolved]
    full = context.metadata.get(FULL_RESOLUTION_KEY) or {}
    source = full.get(resolved, full.get(str(resolved))) if isinstance(full, dict) else None
    return PickedImage(resolved, shown, source if isinstance(source, Image.Image) else shown)


def clamp_point(x: float, y: float, width: int, height: int) -> tuple[float, float, bool]:
    cx, cy = min(max(x, 0.0), width - 1.0), min(max(y, 0.0), height - 1.0)
    return cx, cy, (cx, cy) != (x, y)


def clamp_box(box: Sequence[float], width: int, height: int) -> tuple[tuple[float, float, float, float], bool]:
    """Order the corners and clip them to the image; ``True`` when anything had to change."""
    x1, y1, x2, y2 = (float(v) for v in box)
    ordered = (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))
    clipped = (min(max(ordered[0], 0.0), width), min(max(ordered[1], 0.0), height),
               min(max(ordered[2], 0.0), width), min(max(ordered[3], 0.0), height))
    return clipped, clipped != (x1, y1, x2, y2)


def fmt(value: float) -> str:
    return str(int(round(value))) if abs(value - round(value)) < 1e-6 else f"{value:.1f}"


def as_rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def limit_size(image: Image.Image) -> Image.Image:
    if max(image.size) <= MAX_SIDE:
        return image
    factor = MAX_SIDE / max(image.size)
    return image.resize((max(1, int(image.width * factor)), max(1, int(image.height * factor))),
                        Image.Resampling.LANCZOS)


def next_index_note(context: ToolContext) -> str:
    return f"The result is image {len(context.images)}."


class ImageTool(Tool):
    """Base for tools whose mistakes are input errors: subclasses implement :meth:`apply` and raise
    :class:`ToolInputError` with an explanation the model can act on."""

    def apply(self, arguments: Any, context: ToolContext) -> ToolResult:
        raise NotImplementedError

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        try:
            result = self.apply(arguments, context)
        except ToolInputError as exc:
            return ToolResult(text=sanitize(f"Error: {self.name}: {exc}"), error=True)
        result.text = sanitize(result.text)
        result.images = [limit_size(image) for image in result.images]
        return result

    @staticmethod
    def image_result(text: str, image: Image.Image, context: ToolContext, **metadata: Any) -> ToolResult:
        return ToolResult(text=f"{text} {next_index_note(context)}", images=[image], metadata=metadata)

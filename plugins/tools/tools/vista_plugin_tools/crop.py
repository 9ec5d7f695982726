"""Crop tools.

``crop_zoom`` follows ViGoRL: a window of ``offset`` pixels around a point, always cut from the
original image (not from an earlier crop, so errors do not compound), upsampled so small details
become legible.  ``crop_bbox`` follows Pixel-Reasoner: a box plus relative padding, cut from any
earlier image chosen by index.
"""

from __future__ import annotations

from typing import Annotated

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools.base import (
    ImageTool,
    PickedImage,
    ToolInputError,
    as_rgb,
    clamp_box,
    clamp_point,
    fmt,
    pick_image,
)
from vista_rl import ToolContext, ToolResult

Point = Annotated[list[float], Field(min_length=2, max_length=2)]
Box = Annotated[list[float], Field(min_length=4, max_length=4)]


def upscale_to(image: Image.Image, longest: int) -> Image.Image:
    """Resize so the longer side is ``longest`` pixels, keeping the aspect ratio."""
    factor = longest / max(image.size)
    size = (max(1, round(image.width * factor)), max(1, round(image.height * factor)))
    return image if size == image.size else image.resize(size, Image.Resampling.LANCZOS)


def cut(picked_source: Image.Image, box: tuple[float, float, float, float], scale: tuple[float, float]) -> Image.Image:
    """Crop ``box`` (shown-image pixels) from the source image, which may be larger."""
    sx, sy = scale
    region = (round(box[0] * sx), round(box[1] * sy), round(box[2] * sx), round(box[3] * sy))
    return as_rgb(picked_source.crop(region))


def point_crop(picked: PickedImage, x: float, y: float, offset: float, size: int, *,
               square: bool = False, draw_dot: bool = False) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """The ViGoRL zoom: the window ``[x-offset, x+offset] x [y-offset, y+offset]`` clipped to the shown
    image (so smaller and off-centre near edges), cut from the source image, then resized: to
    ``size`` on the longer side, or to exactly ``size x size`` with ``square=True`` (ViGoRL's fixed
    output).  ``draw_dot`` marks the point with a red dot (radius 7, white outline).  Returns the
    crop and the window in shown-image pixels."""
    width, height = picked.shown.size
    box = (max(0.0, x - offset), max(0.0, y - offset), min(float(width), x + offset), min(float(height), y + offset))
    crop = cut(picked.source, box, picked.scale)
    if square:
        crop = crop if crop.size == (size, size) else crop.resize((size, size), Image.Resampling.LANCZOS)
    else:
        crop = upscale_to(crop, size)
    if draw_dot:
        fx, fy = crop.width / max(box[2] - box[0], 1e-9), crop.height / max(box[3] - box[1], 1e-9)
        cx, cy, r = (x - box[0]) * fx, (y - box[1]) * fy, 7
        ImageDraw.Draw(crop).ellipse((cx - r, cy - r, cx + r, cy + r), fill=(255, 0, 0), outline="white", width=2)
    return crop, box


class CropZoomTool(ImageTool):
    name = "crop_zoom"
    description = ("Zoom in around a point. Cuts a square window of 2*offset pixels centred on "
                   "coordinate [x, y] (pixels of the image you were shown) from the ORIGINAL image "
                   "(image 0 unless `image` says otherwise) and returns it enlarged.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        coordinate: Point = Field(description="[x, y] in pixels of the chosen image")
        offset: int | None = Field(None, ge=4, le=4096, description="half the window side, in pixels")
        image: int = Field(0, description="image to cut from: 0 is the original, -1 the latest")
        size: int | None = Field(None, ge=32, le=2048, description="longer side of the returned image")

    def __init__(self, offset: int = 182, crop_size: int = 672, draw_dot: bool = False) -> None:
        self.offset = offset
        self.crop_size = crop_size
        self.draw_dot = draw_dot

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        width, height = picked.shown.size
        px, py = arguments.coordinate
        x, y, clamped = clamp_point(px, py, width, height)
        crop, box = point_crop(picked, x, y, arguments.offset or self.offset, arguments.size or self.crop_size,
                               draw_dot=self.draw_dot)
        text = (f"Zoomed view of image {picked.index} around ({fmt(x)}, {fmt(y)}): region "
                f"[{', '.join(fmt(v) for v in box)}] of its {width}x{height} pixels, shown at "
                f"{crop.width}x{crop.height}.")
        if clamped:
            text += (f" Note: the point ({fmt(px)}, {fmt(py)}) was outside the {width}x{height} image and "
                     f"was clamped to ({fmt(x)}, {fmt(y)}).")
        return self.image_result(text, crop, context, region=list(box), source_index=picked.index,
                                 point=[x, y], clamped=clamped)


class CropBBoxTool(ImageTool):
    name = "crop_bbox"
    description = ("Crop a box [x1, y1, x2, y2] (pixels of the chosen image, or fractions 0-1 with "
                   "normalized=true) from any earlier image, with padding around it, enlarged if small.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        bbox: Box = Field(description="[x1, y1, x2, y2]")
        image: int = Field(0, description="image to crop: 0 is the original, -1 the latest")
        padding: float = Field(0.1, ge=0.0, le=2.0, description="added on each side, as a fraction of the box size")
        normalized: bool = Field(False, description="bbox values are fractions of width/height")

    def __init__(self, min_side: int = 4, upscale_to: int = 512, max_aspect: float = 100.0) -> None:
        self.min_side = min_side
        self.target = upscale_to
        self.max_aspect = max_aspect

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        width, height = picked.shown.size
        raw = list(arguments.bbox)
        if arguments.normalized:
            raw = [raw[0] * width, raw[1] * height, raw[2] * width, raw[3] * height]
        box, clamped = clamp_box(raw, width, height)
        box_w, box_h = box[2] - box[0], box[3] - box[1]
        if box_w < self.min_side or box_h < self.min_side:
            raise ToolInputError(f"the box [{', '.join(fmt(v) for v in raw)}] covers {fmt(box_w)}x{fmt(box_h)} "
                                 f"pixels inside the {width}x{height} image; it must be at least "
                                 f"{self.min_side}x{self.min_side}")
        if max(box_w, box_h) / min(box_w, box_h) > self.max_aspect:
            raise ToolInputError(f"the box is too thin (aspect ratio above {self.max_aspect:g})")
        pad_x, pad_y = box_w * arguments.padding, box_h * arguments.padding
        padded, _ = clamp_box((box[0] - pad_x, box[1] - pad_y, box[2] + pad_x, box[3] + pad_y), width, height)
        crop = cut(picked.source, padded, picked.scale)
        if max(crop.size) < self.target:
            crop = upscale_to(crop, self.target)
        text = (f"Crop of image {picked.index}: region [{', '.join(fmt(v) for v in padded)}] "
                f"(box plus {arguments.padding:.0%} padding) of its {width}x{height} pixels, shown at "
                f"{crop.width}x{crop.height}.")
        if clamped:
            text += (f" Note: the box [{', '.join(fmt(v) for v in raw)}] reached outside the image and was "
                     f"clamped to [{', '.join(fmt(v) for v in box)}].")
        return self.image_result(text, crop, context, region=list(padded), source_index=picked.index,
                                 clamped=clamped)

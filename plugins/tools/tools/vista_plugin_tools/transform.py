"""Whole-image operations: rotate, flip, contrast/brightness, sharpen, edge map.

They work on the image as the model saw it (the latest by default), so they compose with crops:
zoom, then sharpen the zoomed view.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np
from PIL import Image, ImageEnhance
from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools.base import ImageTool, as_rgb, pick_image
from vista_rl import ToolContext, ToolResult

IMAGE_FIELD = Field(-1, description="which image: 0 is the original, -1 the latest")


def to_array(image: Image.Image) -> np.ndarray:
    return np.asarray(as_rgb(image))


class RotateTool(ImageTool):
    name = "rotate"
    description = "Rotate an image counter-clockwise by `angle` degrees (the canvas grows to fit)."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        angle: float = Field(description="degrees, counter-clockwise; negative turns clockwise", ge=-360, le=360)
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        rotated = as_rgb(picked.shown).rotate(arguments.angle, expand=True, fillcolor=(255, 255, 255),
                                              resample=Image.Resampling.BICUBIC)
        return self.image_result(f"Image {picked.index} rotated by {arguments.angle:g} degrees "
                                 f"counter-clockwise ({rotated.width}x{rotated.height}).", rotated, context)


class FlipTool(ImageTool):
    name = "flip"
    description = "Mirror an image: horizontal (left-right) or vertical (top-bottom)."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        direction: Literal["horizontal", "vertical"] = "horizontal"
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        method = (Image.Transpose.FLIP_LEFT_RIGHT if arguments.direction == "horizontal"
                  else Image.Transpose.FLIP_TOP_BOTTOM)
        flipped = as_rgb(picked.shown).transpose(method)
        return self.image_result(f"Image {picked.index} flipped {arguments.direction}ly.", flipped, context)


class AdjustTool(ImageTool):
    name = "adjust"
    description = "Change contrast and brightness (1.0 keeps the image as it is; 2.0 doubles)."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        contrast: float = Field(1.0, ge=0.0, le=10.0)
        brightness: float = Field(1.0, ge=0.0, le=10.0)
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        out = ImageEnhance.Contrast(as_rgb(picked.shown)).enhance(arguments.contrast)
        out = ImageEnhance.Brightness(out).enhance(arguments.brightness)
        return self.image_result(f"Image {picked.index} with contrast x{arguments.contrast:g} and brightness "
                                 f"x{arguments.brightness:g}.", out, context)


class SharpenTool(ImageTool):
    name = "sharpen"
    description = "Sharpen an image with an unsharp mask (`amount` 0-5, `radius` in pixels)."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        amount: float = Field(1.0, ge=0.0, le=5.0)
        radius: float = Field(2.0, gt=0.0, le=20.0)
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        pixels = to_array(picked.shown).astype(np.float32)
        blurred = cv2.GaussianBlur(pixels, (0, 0), arguments.radius)
        sharp = cv2.addWeighted(pixels, 1.0 + arguments.amount, blurred, -arguments.amount, 0)
        out = Image.fromarray(np.clip(sharp, 0, 255).astype(np.uint8))
        return self.image_result(f"Image {picked.index} sharpened (amount {arguments.amount:g}, radius "
                                 f"{arguments.radius:g}).", out, context)


class EdgesTool(ImageTool):
    name = "edges"
    description = "Canny edge map of an image: white edges on black (thresholds `low` < `high`)."

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        low: int = Field(50, ge=0, le=1000)
        high: int = Field(150, ge=1, le=1000)
        image: int = IMAGE_FIELD

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        low, high = sorted((arguments.low, arguments.high))
        gray = cv2.cvtColor(to_array(picked.shown), cv2.COLOR_RGB2GRAY)
        edges = cv2.Canny(gray, low, high)
        share = float((edges > 0).mean())
        out = Image.fromarray(edges).convert("RGB")
        return self.image_result(f"Edge map of image {picked.index} ({share:.1%} of pixels are edges).", out,
                                 context, edge_fraction=share)

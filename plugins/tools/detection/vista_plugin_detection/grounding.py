"""The ``grounding_dino`` tool: a text query in, boxes, scores and phrases out (VISTA-Gym's shape).

Arguments follow VISTA-Gym's ``grounding_dino`` (``caption`` with phrases separated by " . ",
``box_threshold`` 0.35, ``text_threshold`` 0.25) plus ``image`` (which image of the episode) and
``draw`` (return the image with the boxes drawn, so the model can see what was found).  The result
text carries ``{"boxes", "logits", "phrases", "size": [H, W], "num_detections"}`` as JSON, boxes in
integer pixels of the chosen image; ``ToolResult.metadata`` holds the same dict.

Calls from concurrent episodes are batched into one forward pass (see :mod:`.batching`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field, field_validator
from vista_plugin_tools.base import ImageTool, ToolInputError, as_rgb, pick_image
from vista_plugin_tools.overlay import COLOURS, font

from vista_plugin_detection.batching import MicroBatcher
from vista_plugin_detection.detector import Detection, DetectionRequest, ZeroShotDetector, split_caption
from vista_rl import ToolContext, ToolResult

DEFAULT_MODEL = "IDEA-Research/grounding-dino-tiny"


class GroundingArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    caption: str = Field(..., min_length=1, max_length=512,
                         description='what to find; several phrases separated by " . ", e.g. "red car . bicycle"')
    box_threshold: float = Field(0.35, ge=0.0, le=1.0, description="minimum box confidence")
    text_threshold: float = Field(0.25, ge=0.0, le=1.0, description="minimum phrase-token confidence")
    image: int = Field(-1, description="which image: 0 is the original, -1 the latest")
    draw: bool = Field(False, description="also return the image with the boxes drawn on it")

    @field_validator("caption")
    @classmethod
    def _has_phrase(cls, caption: str) -> str:
        if not split_caption(caption):
            raise ValueError('the caption has no phrase to look for (write e.g. "red car . bicycle")')
        return caption


def draw_detections(image: Image.Image, detections: list[Detection]) -> Image.Image:
    """The image with each box outlined and labelled ``phrase score``."""
    out = as_rgb(image).copy()
    draw = ImageDraw.Draw(out)
    width = max(2, round(max(out.size) / 200))
    label_font = font(max(10, round(max(out.size) / 40)))
    for number, detection in enumerate(detections):
        colour = COLOURS[number % len(COLOURS)]
        draw.rectangle(detection.box, outline=colour, width=width)
        draw.text((detection.box[0] + 2, detection.box[1] + 2), f"{detection.label[:30]} {detection.score:.2f}",
                  fill=colour, font=label_font, stroke_width=2, stroke_fill="white")
    return out


def detections_payload(detections: list[Detection], size: tuple[int, int]) -> dict[str, Any]:
    """VISTA-Gym's ``grounding_dino`` output dict (``size`` is ``[H, W]``)."""
    return {
        "boxes": [[round(v) for v in d.box] for d in detections],
        "logits": [round(d.score, 3) for d in detections],
        "phrases": [d.label for d in detections],
        "size": [size[1], size[0]],
        "num_detections": len(detections),
    }


class GroundingTool(ImageTool):
    """Open-vocabulary grounding on any transformers zero-shot detector (GroundingDINO, OWLv2).

    ``model`` is a Hub name or a local directory; ``device`` ``auto`` picks CUDA when present.
    ``max_batch`` / ``max_wait_ms`` set how concurrent calls are grouped into one forward pass."""

    name = "grounding_dino"
    description = ('Find objects by text. caption: phrases separated by " . " (e.g. "red car . bicycle"). '
                   "Returns boxes [x1, y1, x2, y2] in pixels, confidence scores (logits) and phrases; "
                   "draw=true also returns the image with the boxes drawn.")
    Arguments = GroundingArguments

    def __init__(self, model: str | Path = DEFAULT_MODEL, device: str = "auto", dtype: str = "float32",
                 nms_threshold: float = 0.8, max_detections: int = 50, local_files_only: bool = False,
                 max_batch: int = 8, max_wait_ms: float = 5.0) -> None:
        self.detector = ZeroShotDetector(model, device=device, dtype=dtype, nms_threshold=nms_threshold,
                                         max_detections=max_detections, local_files_only=local_files_only)
        self.batcher: MicroBatcher[DetectionRequest, list[Detection]] = MicroBatcher(
            self.detector.detect, max_batch=max_batch, max_wait_s=max_wait_ms / 1000.0, name="vista-grounding")

    def apply(self, arguments: GroundingArguments, context: ToolContext) -> ToolResult:
        picked = pick_image(context, arguments.image)
        if min(picked.shown.size) < 2:
            raise ToolInputError(f"image {picked.index} is too small to search ({picked.shown.size[0]}x"
                                 f"{picked.shown.size[1]})")
        detections = self.batcher.submit(DetectionRequest(picked.shown, arguments.caption, arguments.box_threshold,
                                                          arguments.text_threshold))
        payload = detections_payload(detections, picked.shown.size)
        payload["mode"] = self.detector.device
        text = (f"grounding_dino on image {picked.index} for {arguments.caption!r}: "
                f"{len(detections)} detection(s).\n{json.dumps(payload)}")
        if not arguments.draw:
            return ToolResult(text=text, metadata=payload)
        return self.image_result(text + "\nThe boxes are drawn on a copy of the image.",
                                 draw_detections(picked.shown, detections), context, **payload)

"""{{ cookiecutter.__item_prefix }}Tool: turn an image of the episode so text or objects read upright.

This is the example to replace with your own tool.  It shows what every VISTA tool does:
- a pydantic ``Arguments`` model: its JSON schema is the OpenAI function schema the model sees,
  and bad arguments come back to the model as a clear error text (``Tool.__call__`` never raises);
- it reads images from the ``ToolContext`` (every image of the episode so far, the original first)
  and returns text and/or new images, which the rollout shows the model as the next observation.
"""

from __future__ import annotations

from typing import Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field
from vista_rl import Tool, ToolContext, ToolResult

TRANSPOSE = {
    90: Image.Transpose.ROTATE_90,
    180: Image.Transpose.ROTATE_180,
    270: Image.Transpose.ROTATE_270,
}


class RotateArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    angle: Literal[90, 180, 270] = Field(description="counter-clockwise rotation in degrees")
    image_index: int = Field(0, ge=0, description="which image of the episode (0 is the first one shown)")


class {{ cookiecutter.__item_prefix }}Tool(Tool):
    """Rotate an image of the episode counter-clockwise by a multiple of 90 degrees."""

    name = "{{ cookiecutter.__item_name }}"
    description = "Rotate an image counter-clockwise by 90, 180 or 270 degrees and return the rotated image."
    Arguments = RotateArguments

    def run(self, arguments: RotateArguments, context: ToolContext) -> ToolResult:
        if arguments.image_index >= len(context.images):
            raise ValueError(f"image_index {arguments.image_index} is out of range: the episode has "
                             f"{len(context.images)} image(s), numbered from 0")
        source = context.images[arguments.image_index]
        rotated = source.transpose(TRANSPOSE[arguments.angle])
        text = (f"Image {arguments.image_index} rotated by {arguments.angle} degrees "
                f"({rotated.width}x{rotated.height}): <image>")
        return ToolResult(text=text, images=[rotated])

"""Visual tools the model calls with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Import-light: OpenCV, Tesseract and the sandbox load only when a tool is made.
"""

from __future__ import annotations

import vista_rl

TOOLS: dict[str, tuple[str, str]] = {
    "crop_zoom": ("crop:CropZoomTool", "Zoom in around a point of the original image (ViGoRL style)"),
    "crop_bbox": ("crop:CropBBoxTool", "Crop a box (plus padding) from any earlier image"),
    "rotate": ("transform:RotateTool", "Rotate an image by an angle"),
    "flip": ("transform:FlipTool", "Mirror an image horizontally or vertically"),
    "adjust": ("transform:AdjustTool", "Change contrast and brightness"),
    "sharpen": ("transform:SharpenTool", "Unsharp-mask sharpening"),
    "edges": ("transform:EdgesTool", "Canny edge map"),
    "grid_overlay": ("overlay:GridOverlayTool", "Draw a labelled pixel-coordinate grid"),
    "mark": ("overlay:MarkTool", "Draw points and boxes"),
    "ocr": ("ocr:OcrTool", "Tesseract OCR: words with boxes and confidence"),
    "python": ("python_tool:PythonTool", "Run Python in a sandbox; returns stdout, stderr, saved images"),
}


@vista_rl.hookimpl
def register_tools(register: vista_rl.RegisterTool) -> None:
    for tool_id, (target, description) in TOOLS.items():
        register(tool_id, f"vista_plugin_tools.{target}", description=description)

"""OCR with the real Tesseract engine (through pytesseract): words with pixel boxes and
confidence, optionally inside a region, in the coordinates of the image the model saw."""

from __future__ import annotations

import shutil
from typing import Annotated, Any, Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools.base import ImageTool, ToolInputError, as_rgb, clamp_box, fmt, pick_image
from vista_rl import ToolContext, ToolResult

PAGE_SEGMENTATION = {"auto": 3, "sparse": 11, "block": 6, "line": 7, "word": 8}


def tesseract_words(image: Image.Image, psm: int, language: str, timeout: float) -> list[dict[str, Any]]:
    """Run Tesseract; one dict per recognised word (text, left/top/width/height, conf, line key)."""
    import pytesseract

    data = pytesseract.image_to_data(image, lang=language, config=f"--psm {psm}",
                                     output_type=pytesseract.Output.DICT, timeout=timeout)
    words = []
    for i, text in enumerate(data["text"]):
        conf = float(data["conf"][i])
        if not text.strip() or conf < 0:
            continue
        words.append({
            "text": text.strip(), "conf": conf,
            "left": data["left"][i], "top": data["top"][i], "width": data["width"][i], "height": data["height"][i],
            "line": (data["block_num"][i], data["par_num"][i], data["line_num"][i]),
        })
    return words


class OcrTool(ImageTool):
    name = "ocr"
    description = ("Read text with Tesseract OCR. Returns the text and every word with its box "
                   "[x1, y1, x2, y2] (pixels of the chosen image) and confidence 0-100. Optional "
                   "`region` [x1, y1, x2, y2] reads only that part.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        image: int = Field(-1, description="which image: 0 is the original, -1 the latest")
        region: Annotated[list[float], Field(min_length=4, max_length=4)] | None = None
        min_confidence: float = Field(30.0, ge=0, le=100)
        mode: Literal["auto", "sparse", "block", "line", "word"] = Field(
            "sparse", description="page layout: sparse text (charts, scenes), a block, one line, one word")

    def __init__(self, language: str = "eng", upscale: float = 2.0, timeout: float = 20.0,
                 max_words: int = 150) -> None:
        self.language = language
        self.upscale = upscale
        self.timeout = timeout
        self.max_words = max_words

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        if shutil.which("tesseract") is None:
            return ToolResult(text="Error: ocr: the Tesseract engine is not installed on this machine "
                                   "(Debian: apt-get install tesseract-ocr).", error=True)
        picked = pick_image(context, arguments.image)
        width, height = picked.shown.size
        box: tuple[float, float, float, float] = (0.0, 0.0, float(width), float(height))
        note = ""
        if arguments.region is not None:
            box, clamped = clamp_box(arguments.region, width, height)
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                raise ToolInputError(f"the region [{', '.join(fmt(v) for v in arguments.region)}] is empty inside "
                                     f"the {width}x{height} image")
            if clamped:
                note = f" Note: the region was clamped to [{', '.join(fmt(v) for v in box)}]."
        sx, sy = picked.scale
        region = as_rgb(picked.source).crop((round(box[0] * sx), round(box[1] * sy),
                                             round(box[2] * sx), round(box[3] * sy)))
        factor = self.upscale
        if factor != 1.0:
            region = region.resize((max(1, round(region.width * factor)), max(1, round(region.height * factor))),
                                   Image.Resampling.LANCZOS)
        try:
            raw_words = tesseract_words(region, PAGE_SEGMENTATION[arguments.mode], self.language, self.timeout)
        except RuntimeError as exc:  # pytesseract raises RuntimeError on its timeout
            return ToolResult(text=f"Error: ocr: Tesseract did not finish ({exc}).", error=True)
        to_shown_x, to_shown_y = 1.0 / (factor * sx), 1.0 / (factor * sy)
        words = []
        for word in raw_words:
            if word["conf"] < arguments.min_confidence:
                continue
            x1 = box[0] + word["left"] * to_shown_x
            y1 = box[1] + word["top"] * to_shown_y
            words.append({
                "text": word["text"], "confidence": round(word["conf"], 1), "line": word["line"],
                "box": [round(x1), round(y1), round(x1 + word["width"] * to_shown_x),
                        round(y1 + word["height"] * to_shown_y)],
            })
        lines: dict[tuple[int, int, int], list[str]] = {}
        for word in words:
            lines.setdefault(word["line"], []).append(word["text"])
        full_text = "\n".join(" ".join(parts) for parts in lines.values())
        where = f"image {picked.index}" + (
            f", region [{', '.join(fmt(v) for v in box)}]" if arguments.region is not None else "")
        if not words:
            return ToolResult(text=f"OCR of {where}: no text found above confidence "
                                   f"{arguments.min_confidence:g}.{note}", metadata={"words": []})
        shown = words[: self.max_words]
        listing = "; ".join(f"\"{w['text']}\" [{', '.join(str(v) for v in w['box'])}] conf {w['confidence']:g}"
                            for w in shown)
        more = f" (first {len(shown)} of {len(words)} words)" if len(words) > len(shown) else ""
        text = f"OCR of {where}: {len(words)} word(s).{note}\nText:\n{full_text}\nWords{more}: {listing}"
        for word in words:
            del word["line"]
        return ToolResult(text=text, metadata={"words": words, "text": full_text})

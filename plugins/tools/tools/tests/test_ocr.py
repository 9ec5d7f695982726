import shutil

import pytest
from PIL import Image, ImageDraw, ImageFont

import vista_rl
from vista_rl import ToolContext
from vista_rl_sdk import check_tool

pytestmark = pytest.mark.skipif(shutil.which("tesseract") is None,
                                reason="Tesseract is not installed (scripts/setup.sh installs it as root)")


def render(lines: list[tuple[str, tuple[int, int]]], size=(900, 300), font_size=44):
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_size)
    boxes = {}
    for text, origin in lines:
        draw.text(origin, text, fill="black", font=font)
        boxes[text] = draw.textbbox(origin, text, font=font)
    return image, boxes


def test_ocr_reads_rendered_text_with_boxes_and_confidence():
    image, boxes = render([("HELLO VISTA 2024", (40, 40)), ("chart value 37.5", (40, 180))])
    result = vista_rl.make_tool("ocr")({"image": 0}, ToolContext(images=[image]))
    assert not result.error, result.text
    words = {w["text"]: w for w in result.metadata["words"]}
    for expected in ("HELLO", "VISTA", "2024", "chart", "value", "37.5"):
        assert expected in words, result.text
        assert words[expected]["confidence"] > 60
    x1, y1, x2, y2 = words["HELLO"]["box"]
    bx1, by1, bx2, by2 = boxes["HELLO VISTA 2024"]
    assert abs(x1 - bx1) <= 6 and abs(y1 - by1) <= 12 and x2 < bx2 and y2 <= by2 + 6  # first word of line 1
    assert "HELLO VISTA 2024" in result.metadata["text"]


def test_ocr_region_and_full_resolution():
    image, _ = render([("LEFT", (40, 120)), ("RIGHT", (600, 120))])
    context = ToolContext(images=[image])
    result = vista_rl.make_tool("ocr")({"region": [500, 0, 900, 300]}, context)
    texts = [w["text"] for w in result.metadata["words"]]
    assert texts == ["RIGHT"], result.text
    assert result.metadata["words"][0]["box"][0] >= 590  # boxes are in the whole image's pixels
    # shown at half size, read from the full-resolution original
    shown = image.resize((450, 150))
    half = vista_rl.make_tool("ocr")({"region": [250, 0, 450, 150]},
                                  ToolContext(images=[shown], metadata={"full_resolution": {0: image}}))
    assert [w["text"] for w in half.metadata["words"]] == ["RIGHT"]
    assert 290 <= half.metadata["words"][0]["box"][0] <= 310


def test_ocr_on_blank_image_and_bad_region():
    blank = ToolContext(images=[Image.new("RGB", (200, 100), "white")])
    result = vista_rl.make_tool("ocr")({}, blank)
    assert not result.error and "no text found" in result.text
    bad = vista_rl.make_tool("ocr")({"region": [300, 300, 400, 400]}, blank)
    assert bad.error and "empty" in bad.text


def test_conformance():
    image, _ = render([("OK", (10, 10))], size=(200, 100))
    check_tool(vista_rl.make_tool("ocr"), {"min_confidence": 10}, ToolContext(images=[image]))

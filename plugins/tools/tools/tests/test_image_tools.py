import numpy as np
import pytest
from PIL import Image, ImageDraw

import vista_rl
from vista_rl import ToolContext
from vista_rl_sdk import check_tool

RED, BLUE = (255, 0, 0), (0, 0, 255)


def scene() -> Image.Image:
    """400x300 white; a red square centred on (300, 200), a blue square on (60, 50)."""
    image = Image.new("RGB", (400, 300), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((280, 180, 320, 220), fill=RED)
    draw.rectangle((40, 30, 80, 70), fill=BLUE)
    return image


def share(image: Image.Image, colour) -> float:
    pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    return float((np.abs(pixels.astype(int) - colour).sum(axis=1) < 60).mean())


VALID = {
    "crop_zoom": {"coordinate": [30, 30]}, "crop_bbox": {"bbox": [5, 5, 40, 40]}, "rotate": {"angle": 90},
    "flip": {"direction": "vertical"}, "adjust": {"contrast": 1.5}, "sharpen": {}, "edges": {},
    "grid_overlay": {}, "mark": {"points": [[10, 10]]},
}


@pytest.mark.parametrize("tool_id", sorted(VALID))
def test_conformance(tool_id):
    tool = vista_rl.make_tool(tool_id)
    check_tool(tool, VALID[tool_id])
    assert vista_rl.host().spec("tools", tool_id).distribution == "vista-plugin-tools"


def test_crop_zoom_returns_the_region_around_the_point_enlarged():
    context = ToolContext(images=[scene()])
    result = vista_rl.make_tool("crop_zoom")({"coordinate": [300, 200], "offset": 20}, context)
    assert not result.error, result.text
    crop = result.images[0]
    assert crop.size == (672, 672)
    assert share(crop, RED) > 0.95  # the window [280, 320] x [180, 220] is the red square
    assert result.metadata["region"] == [280, 180, 320, 220]
    assert "image 1" in result.text  # the crop becomes the next image


def test_crop_zoom_cuts_from_the_original_even_after_other_images():
    # the latest image is a blank crop; crop_zoom still cuts image 0
    context = ToolContext(images=[scene(), Image.new("RGB", (50, 50), "white")])
    result = vista_rl.make_tool("crop_zoom", crop_size=128)({"coordinate": [60, 50], "offset": 15}, context)
    assert share(result.images[0], BLUE) > 0.95 and result.images[0].size == (128, 128)


def test_crop_zoom_uses_full_resolution_with_shown_coordinates():
    full = scene()
    shown = full.resize((100, 75))
    context = ToolContext(images=[shown], metadata={"full_resolution": {0: full}})
    result = vista_rl.make_tool("crop_zoom")({"coordinate": [75, 50], "offset": 5}, context)
    assert share(result.images[0], RED) > 0.95
    assert result.metadata["region"] == [70, 45, 80, 55]  # in shown pixels


def test_crop_zoom_clamps_points_outside_and_says_so():
    result = vista_rl.make_tool("crop_zoom")({"coordinate": [1000, -40], "offset": 30}, ToolContext(images=[scene()]))
    assert not result.error and result.metadata["clamped"]
    assert "clamped to (399, 0)" in result.text
    assert result.metadata["region"] == [369, 0, 400, 30]


def test_crop_bbox_from_an_earlier_image_with_padding_and_errors():
    context = ToolContext(images=[Image.new("RGB", (100, 100), "white"), scene()])
    tool = vista_rl.make_tool("crop_bbox")
    result = tool({"bbox": [280, 180, 320, 220], "image": 1, "padding": 0.0}, context)
    assert share(result.images[0], RED) > 0.95 and max(result.images[0].size) == 512
    padded = tool({"bbox": [280, 180, 320, 220], "image": 1, "padding": 0.5}, context)
    assert padded.metadata["region"] == [260, 160, 340, 240]
    normalized = tool({"bbox": [0.7, 0.6, 0.8, 0.7333], "image": 1, "normalized": True, "padding": 0}, context)
    assert share(normalized.images[0], RED) > 0.9
    clamped = tool({"bbox": [350, 250, 900, 900], "image": 1}, context)
    assert clamped.metadata["clamped"] and "clamped to [350, 250, 400, 300]" in clamped.text
    missing = tool({"bbox": [0, 0, 10, 10], "image": 5}, context)
    assert missing.error and "numbered 0 to 1" in missing.text
    tiny = tool({"bbox": [500, 500, 600, 600], "image": 1}, context)
    assert tiny.error and "at least" in tiny.text
    bad = tool({"bbox": [1, 2, 3]}, context)
    assert bad.error and "bbox" in bad.text


def test_rotate_and_flip_move_pixels_where_expected():
    image = Image.new("RGB", (40, 20), "white")
    image.putpixel((0, 0), RED)
    context = ToolContext(images=[image])
    rotated = vista_rl.make_tool("rotate")({"angle": 90}, context).images[0]
    assert rotated.size == (20, 40) and rotated.getpixel((0, 39)) == RED  # top-left -> bottom-left
    flipped = vista_rl.make_tool("flip")({"direction": "horizontal"}, context).images[0]
    assert flipped.getpixel((39, 0)) == RED
    flipped_v = vista_rl.make_tool("flip")({"direction": "vertical"}, context).images[0]
    assert flipped_v.getpixel((0, 19)) == RED


def test_adjust_sharpen_and_edges():
    context = ToolContext(images=[scene()])
    dark = vista_rl.make_tool("adjust")({"brightness": 0.0}, context).images[0]
    assert np.asarray(dark).max() == 0
    grey = Image.new("RGB", (10, 10), (100, 100, 100))
    grey.putpixel((0, 0), (150, 150, 150))
    stretched = vista_rl.make_tool("adjust")({"contrast": 3.0}, ToolContext(images=[grey])).images[0]
    assert np.asarray(stretched).std() > np.asarray(grey).std()
    blurred = scene().resize((100, 75)).resize((400, 300))
    sharp = vista_rl.make_tool("sharpen")({"amount": 2.0}, ToolContext(images=[blurred])).images[0]
    gradient = lambda im: (np.diff(np.asarray(im.convert("L")).astype(float), axis=1) ** 2).sum()  # noqa: E731
    assert gradient(sharp) > gradient(blurred) * 1.3
    edges = vista_rl.make_tool("edges")({}, context)
    edge_map = np.asarray(edges.images[0].convert("L"))
    assert edge_map[200, 280] > 0 or edge_map[200, 279] > 0 or edge_map[200, 281] > 0  # square border
    assert edge_map[100, 200] == 0  # flat background
    blank = vista_rl.make_tool("edges")({}, ToolContext(images=[Image.new("RGB", (50, 50), "white")]))
    assert blank.metadata["edge_fraction"] == 0.0


def test_grid_overlay_and_mark():
    context = ToolContext(images=[Image.new("RGB", (200, 100), "white")])
    grid = vista_rl.make_tool("grid_overlay")({"step": 50}, context)
    pixels = grid.images[0]
    assert pixels.getpixel((50, 60)) == (255, 0, 0) and pixels.getpixel((120, 50)) == (0, 0, 255)
    assert grid.metadata["lines"] == 4 + 2
    marked = vista_rl.make_tool("mark")({"points": [[100, 50], [500, 20]], "boxes": [[10, 10, 40, 40]]}, context)
    assert not marked.error and marked.metadata["clamped"] and "(500, 20) clamped to (199, 20)" in marked.text
    assert marked.images[0].getpixel((100, 50)) != (255, 255, 255)
    assert marked.images[0].getpixel((10, 25)) != (255, 255, 255)
    assert vista_rl.make_tool("mark")({}, context).error

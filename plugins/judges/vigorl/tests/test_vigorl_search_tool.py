"""``search_coordinate``: crops from the original image, fixed output size, optional red dot."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw
from vista_plugin_vigorl.search_tool import SearchCoordinateTool

import vista_rl
from vista_rl import ToolContext
from vista_rl_sdk import check_tool


def quadrants(size: int = 400) -> Image.Image:
    """Four coloured quadrants, so a crop's colours say where it was cut."""
    image = Image.new("RGB", (size, size))
    draw = ImageDraw.Draw(image)
    half = size // 2
    for (x, y), colour in {(0, 0): "red", (half, 0): "green", (0, half): "blue", (half, half): "yellow"}.items():
        draw.rectangle((x, y, x + half - 1, y + half - 1), fill=colour)
    return image


def test_conformance() -> None:
    check_tool(vista_rl.make_tool("search_coordinate"), {"coordinate": [10, 10]}).raise_if_failed()


def test_crop_is_fixed_size_and_cut_from_the_original_image() -> None:
    original = quadrants()
    # a later image (an earlier crop) in the context must not be what gets cropped
    later = Image.new("RGB", (672, 672), "black")
    tool = SearchCoordinateTool(preset="vstar")
    result = tool({"coordinate": [100, 100]}, ToolContext(images=[original, later]))
    assert not result.error
    crop = result.images[0]
    assert crop.size == (672, 672)
    assert crop.getpixel((336, 336)) == (255, 0, 0)  # centre of the red quadrant, not black
    assert result.metadata["region"] == [0.0, 0.0, 282.0, 282.0]  # 182-px offset, clipped at the edge


def test_edge_window_is_smaller_and_off_centre_but_output_stays_square() -> None:
    tool = SearchCoordinateTool(offset=50, crop_size=128)
    result = tool({"coordinate": [395, 200]}, ToolContext(images=[quadrants()]))
    assert result.metadata["region"] == [345.0, 150.0, 400.0, 250.0]  # 55 x 100 window
    assert result.images[0].size == (128, 128)
    # top half of the crop is green (y < 200), bottom half yellow
    assert result.images[0].getpixel((64, 10)) == (0, 128, 0)
    assert result.images[0].getpixel((64, 118)) == (255, 255, 0)


def test_red_dot_marks_the_point_only_when_asked() -> None:
    plain = Image.new("RGB", (200, 200), "white")
    with_dot = SearchCoordinateTool(preset="web")({"coordinate": [100, 100]}, ToolContext(images=[plain]))
    no_dot = SearchCoordinateTool(preset="default")({"coordinate": [100, 100]}, ToolContext(images=[plain]))
    assert with_dot.images[0].size == (384, 384) and no_dot.images[0].size == (512, 512)
    assert with_dot.images[0].getpixel((192, 192)) == (255, 0, 0)
    assert "red dot" in with_dot.text
    assert no_dot.images[0].getextrema() == ((255, 255), (255, 255), (255, 255))


def test_bad_calls_become_error_results() -> None:
    tool = SearchCoordinateTool()
    image = quadrants()
    for arguments in ({"coordinate": [1.5, 2]}, {"coordinate": [1]}, {"point": [1, 2]}, "{oops"):
        result = tool(arguments, ToolContext(images=[image]))
        assert result.error and not result.images
    assert tool({"coordinate": [1, 2]}, ToolContext(images=[])).error
    outside = tool({"coordinate": [900, -5]}, ToolContext(images=[image]))
    assert not outside.error and "clamped" in outside.text and outside.metadata["point"] == [399.0, 0.0]


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="offset"):
        SearchCoordinateTool(offset=0)


def test_disabled_refuses_every_call_with_text_and_no_image() -> None:
    tool = vista_rl.make_tool("search_coordinate", offset=2, crop_size=112, disabled=True)
    result = tool({"coordinate": [100, 100]}, ToolContext(images=[quadrants()]))
    assert not result.images and "disabled" in result.text
    assert tool({"coordinate": [100, 100, 3]}, ToolContext(images=[quadrants()])).error  # arguments still checked

"""Behaviour of the example tool: real rotation, clear errors for bad calls.

These test the template's example tool: replace them with tests of yours when you replace the
example (they fail against anything else).  tests/test_*_conformance.py needs no change: it checks
whatever the plugin registers.
"""

from __future__ import annotations

import vista_rl
from PIL import Image
from vista_rl import ToolContext

TOOL_ID = "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}"


def marked_image() -> Image.Image:
    """A 40x20 white image with one red pixel in the top-left corner."""
    image = Image.new("RGB", (40, 20), "white")
    image.putpixel((0, 0), (255, 0, 0))
    return image


def test_rotating_by_90_swaps_the_sides_and_moves_the_corner() -> None:
    result = vista_rl.make_tool(TOOL_ID)({"angle": 90}, ToolContext(images=[marked_image()]))
    assert not result.error
    (rotated,) = result.images
    assert rotated.size == (20, 40)
    # counter-clockwise: the top-left corner ends up bottom-left
    assert rotated.getpixel((0, 39)) == (255, 0, 0)
    assert result.text.count("<image>") == len(result.images)


def test_four_quarter_turns_give_the_original_back() -> None:
    tool = vista_rl.make_tool(TOOL_ID)
    image = marked_image()
    for _ in range(4):
        image = tool({"angle": 90}, ToolContext(images=[image])).images[0]
    assert image.tobytes() == marked_image().tobytes()


def test_missing_image_is_an_error_result_not_an_exception() -> None:
    result = vista_rl.make_tool(TOOL_ID)({"angle": 180, "image_index": 3}, ToolContext(images=[marked_image()]))
    assert result.error and "out of range" in result.text and not result.images


def test_schema_offers_the_allowed_angles() -> None:
    schema = vista_rl.make_tool(TOOL_ID).openai_schema()
    assert schema["function"]["name"] == "{{ cookiecutter.__item_name }}"
    assert schema["function"]["parameters"]["properties"]["angle"]["enum"] == [90, 180, 270]

"""The kit's pieces on their own: the marker's grey-averaging property, the layout checks and the typed
config fields (the envs' own tests cover them inside zoom-small-v0 and zoom-spot-v0)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw
from pydantic import BaseModel, Field, ValidationError
from vista_plugin_scenekit import (
    BACKGROUND,
    COLOURS,
    DOT_COLOURS,
    FRAME,
    SHAPES,
    DisplaySize,
    DotColourNames,
    Factor,
    GridSide,
    MarkerSide,
    check_marker_grid,
    complement,
    default_dot_colours,
    draw_framed_marker,
    draw_shape,
    frame_box,
    frame_half_side,
    marker_centres,
    marker_mask,
)


class Layout(BaseModel):
    grid: GridSide = Field(2, description="cells per side")
    display_size: DisplaySize = 56
    factor: Factor = 8
    colours: DotColourNames = Field(default_factory=default_dot_colours)
    marker: MarkerSide = 2


@pytest.mark.parametrize(("factor", "blocks"), [(2, 2), (4, 2), (8, 2), (8, 4), (5, 2)])
def test_marker_mask_is_half_dot_in_every_block(factor: int, blocks: int) -> None:
    mask = np.array(marker_mask(factor, blocks))
    assert mask.shape == (blocks * factor, blocks * factor)
    for by in range(blocks):
        for bx in range(blocks):
            block = mask[by * factor:(by + 1) * factor, bx * factor:(bx + 1) * factor]
            assert block.sum() == factor * factor // 2
    # The dot is the middle: the centre pixels are dot, the corners are its complement.
    middle = blocks * factor // 2
    assert mask[middle, middle] and mask[middle - 1, middle - 1] and not mask[0, 0] and not mask[-1, -1]


def test_every_dot_colour_averages_with_its_complement_to_the_background() -> None:
    answer_colours = set(DOT_COLOURS.values())
    for colour in DOT_COLOURS.values():
        ring = complement(colour)
        assert all(0 <= channel <= 255 for channel in ring)
        assert tuple((a + b) / 2 for a, b in zip(colour, ring, strict=True)) == BACKGROUND
        assert ring not in answer_colours  # the crop's colours name the answer


@pytest.mark.parametrize("colour", sorted(DOT_COLOURS))
def test_a_framed_marker_is_grey_in_the_view_and_plain_at_full_resolution(colour: str) -> None:
    grid, display, factor, marker = 2, 56, 8, 2
    full = Image.new("RGB", (display * factor, display * factor), BACKGROUND)
    centre = marker_centres(grid, display)[3]
    half_side = frame_half_side(grid, display, marker)
    draw_framed_marker(full, centre, colour, factor=factor, marker=marker, half_side=half_side)
    view = np.asarray(full.reduce(factor))
    cx, cy = centre
    assert (view[cy - 1:cy + 1, cx - 1:cx + 1] == BACKGROUND).all()  # the marker: grey in the view
    x1, y1, x2, y2 = frame_box(centre, half_side)
    assert tuple(view[y1, x1]) == FRAME and tuple(view[y2, x2]) == FRAME  # the frame: visible
    assert tuple(view[y1 - 1, x1 - 1]) == BACKGROUND and tuple(view[y2 + 1, x2 + 1]) == BACKGROUND
    assert full.getpixel((cx * factor, cy * factor)) == DOT_COLOURS[colour]  # the dot: plain in a zoom
    assert full.getpixel(((cx - 1) * factor, (cy - 1) * factor)) == complement(DOT_COLOURS[colour])


def test_marker_centres_sit_on_whole_view_pixels_in_cell_centres() -> None:
    assert marker_centres(2, 112) == [(28, 28), (84, 28), (28, 84), (84, 84)]
    assert marker_centres(3, 28) == [(5, 5), (14, 5), (23, 5), (5, 14), (14, 14), (23, 14), (5, 23), (14, 23), (23, 23)]


def test_check_marker_grid_refuses_cells_too_small_for_a_framed_marker() -> None:
    check_marker_grid(3, 28, 2)  # 9-pixel cells hold a 2-pixel marker with its frame
    with pytest.raises(ValueError, match=r"display_size 28 is too small for a 4x4 grid of 2-pixel markers"):
        check_marker_grid(4, 28, 2)
    with pytest.raises(ValueError, match="too small"):
        check_marker_grid(1, 28, 24)


def test_layout_fields_keep_the_env_defaults_and_check_values() -> None:
    layout = Layout()
    assert (layout.grid, layout.display_size, layout.factor, layout.marker) == (2, 56, 8, 2)
    assert layout.colours == list(DOT_COLOURS) and layout.colours is not Layout().colours
    schema = Layout.model_json_schema()["properties"]
    assert schema["factor"]["description"] == "full resolution / view (the downscale factor)"
    assert schema["grid"]["description"] == "cells per side" and schema["grid"]["maximum"] == 8
    assert schema["marker"]["minimum"] == 2 and schema["colours"]["minItems"] == 2
    for bad, message in [({"marker": 3}, "marker must be even"), ({"colours": ["red", "teal"]}, "unknown colour"),
                         ({"colours": ["red", "red"]}, "must not repeat"), ({"colours": ["red"]}, "at least 2"),
                         ({"factor": 1}, "greater than or equal to 2"), ({"display_size": 2000}, "less than")]:
        with pytest.raises(ValidationError, match=message):
            Layout(**bad)


def test_draw_shape_draws_every_shape_and_refuses_an_unknown_one() -> None:
    for shape in SHAPES:
        image = Image.new("RGB", (40, 40), (255, 255, 255))
        draw_shape(ImageDraw.Draw(image), shape, (10, 10, 30, 30), COLOURS["red"])
        pixels = np.asarray(image)
        assert tuple(pixels[20, 20]) == COLOURS["red"] and tuple(pixels[2, 2]) == (255, 255, 255), shape
    with pytest.raises(ValueError, match="unknown shape 'hexagon'"):
        draw_shape(ImageDraw.Draw(Image.new("RGB", (8, 8))), "hexagon", (0, 0, 7, 7), COLOURS["red"])


def test_importing_the_kit_registers_nothing() -> None:
    """A kit is a library: no vista_rl hook implementation in its package."""
    import vista_plugin_scenekit

    assert not [name for name in dir(vista_plugin_scenekit) if name.startswith("register_")]

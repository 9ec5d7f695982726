"""The kit the scene-drawing envs share: named colours and shapes, and the zoom marker that the
downscaled view shows as plain grey (its colours, mask, grid, frame and config fields).
``vista-plugin-visual-search`` and ``vista-plugin-grounding`` build on it, so neither imports the
other's helpers.  A library, not a plugin: importing it registers nothing.
"""

from vista_plugin_scenekit.fields import (
    DisplaySize,
    DotColourNames,
    Factor,
    GridSide,
    MarkerSide,
    default_dot_colours,
    even_marker,
    known_dot_colours,
)
from vista_plugin_scenekit.markers import (
    BACKGROUND,
    DOT_COLOURS,
    FRAME,
    GREY,
    check_marker_grid,
    complement,
    draw_framed_marker,
    frame_box,
    frame_half_side,
    marker_centres,
    marker_mask,
)
from vista_plugin_scenekit.shapes import COLOURS, DISTRACTOR_SHAPES, SHAPES, draw_shape

__all__ = [
    "BACKGROUND", "COLOURS", "DISTRACTOR_SHAPES", "DOT_COLOURS", "FRAME", "GREY", "SHAPES", "DisplaySize",
    "DotColourNames", "Factor", "GridSide", "MarkerSide", "check_marker_grid", "complement", "default_dot_colours",
    "draw_framed_marker", "draw_shape", "even_marker", "frame_box", "frame_half_side", "known_dot_colours",
    "marker_centres", "marker_mask",
]

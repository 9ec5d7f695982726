"""The marker layout's config fields, typed once: an env's config declares ``factor: Factor = 8`` and
gets the bounds, the description and the validation the marker needs (an even marker side, known and
distinct dot colours), without copying them.  Defaults stay with each env, since its task sets them."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from vista_plugin_scenekit.markers import DOT_COLOURS


def even_marker(value: int) -> int:
    """A marker's centre sits on a view-pixel corner, so its side is even."""
    if value % 2:
        raise ValueError("marker must be even (its centre sits on a view-pixel corner)")
    return value


def known_dot_colours(value: list[str]) -> list[str]:
    """Every colour is a :data:`DOT_COLOURS` name, none twice (the answer must be one colour)."""
    unknown = [name for name in value if name not in DOT_COLOURS]
    if unknown:
        raise ValueError(f"unknown colour(s) {unknown}; choose from {sorted(DOT_COLOURS)}")
    if len(set(value)) != len(value):
        raise ValueError("colours must not repeat")
    return value


def default_dot_colours() -> list[str]:
    """Every answer colour, in :data:`DOT_COLOURS` order (a fresh list per config)."""
    return list(DOT_COLOURS)


#: Cells per side of the layout (each env says what a cell holds in its own description).
GridSide = Annotated[int, Field(ge=1, le=8)]
DisplaySize = Annotated[int, Field(ge=28, le=1024, description="side of the view the model gets")]
Factor = Annotated[int, Field(ge=2, le=32, description="full resolution / view (the downscale factor)")]
MarkerSide = Annotated[int, Field(ge=2, le=32, description="marker side in view pixels (even)"),
                       AfterValidator(even_marker)]
DotColourNames = Annotated[list[str], Field(min_length=2), AfterValidator(known_dot_colours)]

"""Grid states in VAGEN's relation form and in plain sentences.

VAGEN scores ``<observation>``/``<prediction>`` against a list of
``{"object_id", "vertical_relation", "horizontal_relation"}`` relative to the player, so envs put
that form in ``info`` (before and after the turn) for judges, and the oracle's think text is written
from the same positions, so it is true by construction.
"""

from __future__ import annotations

from collections.abc import Iterable

Cell = tuple[int, int]


def relation(player: Cell, obj: Cell) -> tuple[str, str]:
    """(vertical, horizontal) of ``obj`` seen from ``player``: above/below/same, left/right/same."""
    vertical = "above" if obj[0] < player[0] else "below" if obj[0] > player[0] else "same"
    horizontal = "left" if obj[1] < player[1] else "right" if obj[1] > player[1] else "same"
    return vertical, horizontal


def relations(player: Cell, objects: Iterable[tuple[str, Cell]]) -> list[dict[str, str]]:
    out = []
    for object_id, cell in objects:
        vertical, horizontal = relation(player, cell)
        out.append({"object_id": object_id, "vertical_relation": vertical, "horizontal_relation": horizontal})
    return out


def _offset_words(player: Cell, obj: Cell) -> str:
    rows, cols = obj[0] - player[0], obj[1] - player[1]
    if not rows and not cols:
        return "at the same cell as"
    vertical = f"{abs(rows)} row{'s' if abs(rows) != 1 else ''} {'above' if rows < 0 else 'below'}" if rows else ""
    if not cols:
        return vertical
    horizontal = f"{abs(cols)} column{'s' if abs(cols) != 1 else ''} to the {'left' if cols < 0 else 'right'} of"
    return f"{vertical} and {horizontal}" if vertical else horizontal


def describe(player: Cell, objects: Iterable[tuple[str, Cell]], subject: str = "the player") -> str:
    """``"The box is 1 row below and 2 columns to the left of the player. ..."``"""
    return " ".join(f"The {name} is {_offset_words(player, cell)} {subject}." for name, cell in objects)

"""``(x, y)`` references in model text, and ViGoRL's grounded-format terms.

ViGoRL's single-turn reward is ``0.5·acc + 0.5·(format·coordinate)``, where ``coordinate`` means the
``<think>`` cites at least one integer point; its multi-turn format bonus counts *unique* points,
two points being the same when they are under 10 pixels apart
(:func:`vista_plugin_judges.points.unique_points`).  These helpers compute exactly those terms so every env in this plugin scores grounding the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_POINT = re.compile(r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")
_INT_POINT = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")
MAX_SCAN_CHARS = 20_000


def points_in(text: str, integers_only: bool = False) -> list[tuple[float, float]]:
    """Every ``(x, y)`` in ``text`` (the first 20,000 characters: a runaway response costs nothing)."""
    pattern = _INT_POINT if integers_only else _POINT
    return [(float(x), float(y)) for x, y in pattern.findall(text[:MAX_SCAN_CHARS])]


def think_points(thinks: Iterable[str], integers_only: bool = True) -> list[tuple[float, float]]:
    """The points cited across ``<think>`` blocks, in order."""
    found: list[tuple[float, float]] = []
    for text in thinks:
        found.extend(points_in(text, integers_only=integers_only))
    return found


def format_bonus(unique_count: int, cap: int, per_extra: float = 0.2) -> float:
    """ViGoRL multi-turn format score: 1 + 0.2 per unique point beyond the first (0 points: 1), the
    points counted up to ``cap``.  ViGoRL's scorer has no explicit cap, but its turn limit bounds the
    zooms an episode can make; without one a policy farms the bonus by zooming everywhere."""
    return 1.0 + per_extra * max(0, min(unique_count, cap) - 1)


def parse_point(text: str) -> tuple[float, float] | None:
    """The single point an answer names: ``(x, y)``, ``x, y`` or ``[x, y]``; ``None`` otherwise."""
    found = points_in(text)
    if len(found) == 1:
        return found[0]
    bare = re.fullmatch(r"\s*\[?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]?\s*", text[:200])
    return (float(bare.group(1)), float(bare.group(2))) if bare else None

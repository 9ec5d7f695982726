"""Distinct points among many, in linear time.

Rewards that pay per *distinct* place a model names (ViGoRL's multi-turn bonus counts tool-call
coordinates at least 10 px apart) must not cost time quadratic in what a policy or a client sends:
12,000 points made a reward step take 5 s with the pairwise scan.  A grid of cells as wide as the
distance keeps the same greedy answer while looking at only the 3x3 cells around each point.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: Beyond this no image has a pixel; such points are skipped (and cannot overflow the cell index).
MAX_ABS_COORDINATE = 1e12


def unique_points(points: Iterable[Sequence[float]], min_distance: float = 10.0) -> list[tuple[float, float]]:
    """Points kept greedily in order: a point counts when it is at least ``min_distance`` (Euclidean)
    from every point kept before it.  Non-finite points, and points beyond
    :data:`MAX_ABS_COORDINATE`, are skipped (they name no place in any image).

    Same result as the pairwise scan: any kept point closer than ``min_distance`` lies in one of the
    eight cells around the new point's cell, or in that cell itself, when a cell is ``min_distance``
    wide."""
    if not min_distance > 0:
        raise ValueError("min_distance must be positive")
    cells: dict[tuple[int, int], list[tuple[float, float]]] = {}
    kept: list[tuple[float, float]] = []
    for point in points:
        x, y = float(point[0]), float(point[1])
        if not (abs(x) <= MAX_ABS_COORDINATE and abs(y) <= MAX_ABS_COORDINATE):  # NaN fails too
            continue
        cx, cy = math.floor(x / min_distance), math.floor(y / min_distance)
        near = (cells.get((cx + dx, cy + dy), ()) for dx in (-1, 0, 1) for dy in (-1, 0, 1))
        if all(math.hypot(x - kx, y - ky) >= min_distance for cell in near for kx, ky in cell):
            cells.setdefault((cx, cy), []).append((x, y))
            kept.append((x, y))
    return kept

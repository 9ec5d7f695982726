"""Sokoban sprites, drawn once per tile size as numpy arrays (see ``vista_plugin_gamekit.sprites``)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from vista_plugin_gamekit.sprites import centred_coords, freeze, solid

# Tile kinds, in the order of the array returned by `tiles`.
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = range(7)


def _wall(size: int) -> np.ndarray:
    tile = solid(size, (150, 70, 45))
    mortar = (205, 190, 170)
    half = max(size // 2, 1)
    tile[0, :] = mortar
    tile[half, :] = mortar
    tile[:half, 0] = mortar
    tile[half:, half] = mortar
    return tile


def _floor(size: int) -> np.ndarray:
    tile = solid(size, (70, 70, 78))
    tile[0, :] = tile[:, 0] = (58, 58, 64)
    return tile


def _target(size: int) -> np.ndarray:
    tile = _floor(size)
    dy, dx = centred_coords(size)
    ring = np.abs(np.abs(dy) + np.abs(dx) - size * 0.3) <= max(size * 0.07, 0.6)
    tile[ring] = (230, 50, 50)
    return tile


def _box(size: int, base: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    tile = base.copy()
    margin = max(size // 8, 1)
    inner = slice(margin, size - margin)
    tile[inner, inner] = colour
    edge = tuple(int(c * 0.55) for c in colour)
    tile[margin, inner] = tile[size - margin - 1, inner] = edge
    tile[inner, margin] = tile[inner, size - margin - 1] = edge
    dy, dx = centred_coords(size)
    cross = ((np.abs(dy - dx) <= 0.6) | (np.abs(dy + dx) <= 0.6)) & (np.abs(dy) < size / 2 - margin - 1)
    tile[cross & (np.abs(dx) < size / 2 - margin - 1)] = edge
    return tile


def _player(size: int, base: np.ndarray) -> np.ndarray:
    tile = base.copy()
    dy, dx = centred_coords(size)
    body = ((dy - size * 0.15) / (size * 0.3)) ** 2 + (dx / (size * 0.28)) ** 2 <= 1.0
    head = (dy + size * 0.22) ** 2 + dx ** 2 <= (size * 0.17) ** 2
    tile[body] = (40, 160, 230)
    tile[head] = (250, 215, 170)
    return tile


@lru_cache(maxsize=8)
def tiles(size: int) -> np.ndarray:
    """Array (7, size, size, 3) of the tile kinds; read-only, shared by every env."""
    floor, target = _floor(size), _target(size)
    return freeze([
        _wall(size), floor, target,
        _box(size, floor, (215, 150, 60)),
        _box(size, target, (90, 200, 90)),
        _player(size, floor), _player(size, target),
    ])

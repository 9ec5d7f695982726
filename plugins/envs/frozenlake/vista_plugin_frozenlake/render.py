"""FrozenLake sprites, drawn once per tile size as numpy arrays (see ``vista_plugin_gamekit.sprites``)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from vista_plugin_gamekit.sprites import centred_coords, freeze, solid

FROZEN, HOLE, GOAL, PLAYER, PLAYER_IN_HOLE, PLAYER_ON_GOAL = range(6)


def _ice(size: int) -> np.ndarray:
    tile = solid(size, (200, 230, 245))
    tile[0, :] = tile[:, 0] = (160, 200, 225)
    dy, dx = centred_coords(size)
    glint = np.abs(dy + dx + size * 0.2) <= max(size * 0.03, 0.5)
    tile[glint & (np.abs(dx) < size * 0.2)] = (245, 252, 255)
    return tile


def _hole(size: int) -> np.ndarray:
    tile = _ice(size)
    dy, dx = centred_coords(size)
    tile[(dy / (size * 0.36)) ** 2 + (dx / (size * 0.44)) ** 2 <= 1.0] = (25, 45, 90)
    return tile


def _goal(size: int) -> np.ndarray:
    tile = _ice(size)
    dy, dx = centred_coords(size)
    box = (np.abs(dy - size * 0.08) <= size * 0.28) & (np.abs(dx) <= size * 0.3)
    tile[box] = (235, 180, 40)
    ribbon = box & ((np.abs(dx) <= size * 0.05) | (np.abs(dy - size * 0.08) <= size * 0.05))
    tile[ribbon] = (200, 40, 40)
    return tile


def _player(base: np.ndarray) -> np.ndarray:
    size = base.shape[0]
    tile = base.copy()
    dy, dx = centred_coords(size)
    tile[((dy - size * 0.12) / (size * 0.28)) ** 2 + (dx / (size * 0.22)) ** 2 <= 1.0] = (40, 140, 60)
    tile[(dy + size * 0.24) ** 2 + dx ** 2 <= (size * 0.14) ** 2] = (250, 215, 170)
    return tile


#: ``tile_style: flat``: one solid colour per tile kind (ice, hole, goal, player, player in a hole,
#: player on the goal), in the sprites' own colours.
FLAT_COLOURS = ((200, 230, 245), (25, 45, 90), (235, 180, 40), (40, 140, 60), (20, 70, 30), (120, 160, 40))


@lru_cache(maxsize=8)
def flat_tiles(size: int) -> np.ndarray:
    """Array (6, size, size, 3) of solid tiles: for images so small that a sprite would be a pixel or
    two (a 28x28 map is 7 px a cell), where the kind of a cell must survive the resize whole."""
    return freeze([solid(size, colour) for colour in FLAT_COLOURS])


@lru_cache(maxsize=8)
def tiles(size: int) -> np.ndarray:
    """Array (6, size, size, 3) of the tile kinds; read-only, shared by every env."""
    ice, hole, goal = _ice(size), _hole(size), _goal(size)
    in_hole = _player(hole)
    in_hole[size // 2:] = hole[size // 2:]  # sunk to the waist
    return freeze([ice, hole, goal, _player(ice), in_hole, _player(goal)])

"""Tile sprites as numpy arrays and frames composed by slicing (shared by the grid games).

Why not PIL drawing per frame: a frame is a grid of a few kinds of tile, so drawing each kind once
(cached per tile size by the game) and copying tiles into an array costs microseconds.
"""

from __future__ import annotations

import numpy as np


def centred_coords(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column offsets of every pixel from the tile centre (for drawing shapes as masks)."""
    centre = (size - 1) / 2.0
    rows, cols = np.mgrid[0:size, 0:size]
    return rows - centre, cols - centre


def solid(size: int, colour: tuple[int, int, int]) -> np.ndarray:
    tile = np.empty((size, size, 3), dtype=np.uint8)
    tile[:] = colour
    return tile


def freeze(stack: list[np.ndarray]) -> np.ndarray:
    """Stack tiles into one read-only (kinds, size, size, 3) array."""
    out = np.stack(stack)
    out.setflags(write=False)
    return out


def compose(tiles: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Frame (H*size, W*size, 3) for a grid of tile kinds (H, W)."""
    height, width = kinds.shape
    size = tiles.shape[1]
    sprites = tiles[kinds]  # (H, W, size, size, 3)
    return np.ascontiguousarray(sprites.transpose(0, 2, 1, 3, 4).reshape(height * size, width * size, 3))


def paint(frame: np.ndarray, tile: np.ndarray, row: int, col: int) -> None:
    """Overwrite one cell of a composed frame."""
    size = tile.shape[0]
    frame[row * size:(row + 1) * size, col * size:(col + 1) * size] = tile

"""Tile sprites as numpy arrays, frames composed by slicing, and a frame cache that repaints only
changed cells (shared by the grid games).

Why not PIL drawing per frame: a frame is a grid of a few kinds of tile, so drawing each kind once
(cached per tile size by the game) and copying tiles into an array costs microseconds.
"""

from __future__ import annotations

from collections.abc import Callable

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


class TileFrame:
    """A grid game's current frame, redrawn only where something changed.

    Why: between two frames a move changes two or three cells, so recomposing the whole grid each
    turn wastes most of the work.  The game calls :meth:`mark` with every cell an action (or an
    oracle look-ahead and undo) touched, and :meth:`reset` for a new board; :meth:`render` composes
    the full frame the first time and afterwards repaints just the marked cells.  Cells are
    row-major indices (``row * width + col``).
    """

    def __init__(self) -> None:
        self._frame: np.ndarray | None = None
        self._dirty: set[int] = set()

    def reset(self) -> None:
        """Forget the frame (a new board): the next :meth:`render` composes it in full."""
        self._frame = None
        self._dirty.clear()

    def mark(self, *cells: int) -> None:
        """Cells whose tile may have changed since the last :meth:`render`."""
        self._dirty.update(cells)

    def render(self, tiles: np.ndarray, height: int, width: int, kind: Callable[[int], int]) -> np.ndarray:
        """The frame (height*size, width*size, 3) for the tile kinds ``kind(cell)`` gives.

        The array is owned by this cache and repainted in place by later calls: copy it to keep it.
        """
        size = tiles.shape[1]
        if self._frame is None or self._frame.shape != (height * size, width * size, 3):
            kinds = np.fromiter((kind(cell) for cell in range(height * width)), dtype=np.intp,
                                count=height * width)
            self._frame = compose(tiles, kinds.reshape(height, width))
        else:
            for cell in self._dirty:
                paint(self._frame, tiles[kind(cell)], *divmod(cell, width))
        self._dirty.clear()
        return self._frame

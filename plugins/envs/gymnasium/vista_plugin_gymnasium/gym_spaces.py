"""Fixed-shape gymnasium spaces for VISTA observations, so vector envs can use shared memory.

Why: ``AsyncVectorEnv`` by default copies observations through shared memory, which needs every
part of the observation space to have a fixed size.  A ``Sequence(Box)`` of images has a dynamic
shape, and gymnasium's ``Text`` stores characters as indices into a charset (a model writes ``<``,
newlines and any unicode, which are outside it).  So:

- images are a ``Box(max_images, H, W, 3)``, zero-padded, with the count beside it; an image of
  another size (a tool's 672-pixel zoom) is scaled to fit inside ``H x W`` and centred, so it stays
  inside the declared space;
- :class:`AnyText` holds any string, and in shared memory it is its UTF-8 bytes behind a length
  (registered with gymnasium's ``create/read/write_to_shared_memory`` when this module is imported,
  which the worker processes do when they unpickle the env).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory
from PIL import Image

_LENGTH_BYTES = 4


class AnyText(spaces.Text):
    """A Text space that contains any string up to ``max_length`` characters (models write any
    characters); in shared memory up to ``max_length`` UTF-8 bytes."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


def _slot(space: AnyText) -> int:
    return _LENGTH_BYTES + space.max_length


@create_shared_memory.register(AnyText)
def _create_any_text_memory(space: AnyText, n: int = 1, ctx: Any = multiprocessing) -> Any:
    return ctx.Array("B", n * _slot(space))


@write_to_shared_memory.register(AnyText)
def _write_any_text(space: AnyText, index: int, value: str, shared_memory: Any) -> None:
    data = value.encode("utf-8", "surrogatepass")
    if len(data) > space.max_length:
        raise ValueError(f"an observation text of {len(data)} UTF-8 bytes does not fit the shared-memory slot of "
                         f"{space.max_length}; pass a larger max_text_length to VistaGymEnv")
    buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
    start = index * _slot(space)
    buffer[start:start + _LENGTH_BYTES] = np.frombuffer(len(data).to_bytes(_LENGTH_BYTES, "little"), dtype=np.uint8)
    buffer[start + _LENGTH_BYTES:start + _LENGTH_BYTES + len(data)] = np.frombuffer(data, dtype=np.uint8)


class SharedTexts(Sequence[str]):
    """The texts of all sub-envs, decoded from shared memory when read.  Why a view: the vector env
    reads its shared memory once and then hands out (deep copies of) what it read, which for numpy
    arrays are live views; a tuple of strings read at start would never change."""

    def __init__(self, space: AnyText, shared_memory: Any, n: int) -> None:
        self._buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
        self._slot, self._n = _slot(space), n

    def __len__(self) -> int:
        return self._n

    def _text(self, index: int) -> str:
        if not 0 <= index < self._n:
            raise IndexError(index)
        start = index * self._slot
        length = int.from_bytes(self._buffer[start:start + _LENGTH_BYTES].tobytes(), "little")
        return self._buffer[start + _LENGTH_BYTES:start + _LENGTH_BYTES + length].tobytes().decode("utf-8",
                                                                                                  "surrogatepass")

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self._text(i) for i in range(*index.indices(self._n)))
        return self._text(index if index >= 0 else self._n + index)

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)  # what AsyncVectorEnv(copy=True), the default, returns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(AnyText)
def _read_any_text(space: AnyText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


def image_space(max_images: int, shape: tuple[int, int, int]) -> spaces.Box:
    return spaces.Box(0, 255, shape=(max_images, *shape), dtype=np.uint8)


def fit(image: Image.Image, shape: tuple[int, int, int]) -> np.ndarray:
    """``image`` as an HxWx3 array of exactly ``shape``: scaled (aspect kept) to fit and centred on black."""
    height, width = shape[0], shape[1]
    rgb = image.convert("RGB")
    if rgb.size == (width, height):
        return np.asarray(rgb, dtype=np.uint8)
    scale = min(width / rgb.width, height / rgb.height)
    size = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
    canvas = Image.new("RGB", (width, height))
    canvas.paste(rgb.resize(size, Image.Resampling.BILINEAR), ((width - size[0]) // 2, (height - size[1]) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def pack(images: Sequence[Image.Image], max_images: int, shape: tuple[int, int, int]) -> tuple[np.ndarray, int]:
    """The padded image block and the count; more than ``max_images`` images is an error that says
    which option to raise."""
    if len(images) > max_images:
        raise ValueError(f"the observation holds {len(images)} images but the observation space has room for "
                         f"max_images={max_images}; pass VistaGymEnv(..., max_images={len(images)}) or more")
    block = np.zeros((max_images, *shape), dtype=np.uint8)
    for slot, image in enumerate(images):
        block[slot] = fit(image, shape)
    return block, len(images)

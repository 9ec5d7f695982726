"""Any gymnasium observation (Discrete, Box, Dict, Tuple, Text) as prompt parts and as JSON for ``info``.

Why: peers' envs return structured observations (MiniGrid: ``{"image", "direction", "mission"}``;
Atari: a 210x160x3 frame), and the bridge must neither crash on them nor copy a frame into every
trajectory line.  The rules:

- an *image* is a uint8 array shaped HxW, HxWx1, HxWx3 or HxWx4 with both sides at least
  ``MIN_IMAGE_SIDE`` pixels (MiniGrid's 7x7x3 ``image`` is a symbolic encoding, not a picture);
- a string under a mission-like key (``mission``, ``instruction``, ...) goes into the prompt;
- small arrays and scalars become text; bigger non-image arrays are summarised by shape;
- in ``info`` an image is stored by reference (the content hash the run store names its PNGs by),
  never inline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MIN_IMAGE_SIDE = 16
SMALL_ARRAY = 64  # elements: up to this many go into info as a list
PROMPT_ARRAY = 16  # elements: up to this many go into the prompt as text
TEXT_KEYS = ("mission", "instruction", "instructions", "goal", "task", "text", "prompt")


def is_image(value: Any) -> bool:
    """Whether ``value`` is a picture (see the module docstring)."""
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8:
        return False
    if value.ndim == 3 and value.shape[2] in (1, 3, 4):
        return min(value.shape[:2]) >= MIN_IMAGE_SIDE
    return value.ndim == 2 and min(value.shape) >= MIN_IMAGE_SIDE


def to_rgb(value: np.ndarray) -> np.ndarray:
    """An image array as HxWx3 uint8."""
    if value.ndim == 2:
        value = value[:, :, None]
    if value.shape[2] == 1:
        return np.repeat(value, 3, axis=2)
    return np.ascontiguousarray(value[:, :, :3])


def image_ref(value: np.ndarray) -> dict[str, Any]:
    """A frame by reference: its shape and the run store's content hash of it as an RGB image (the
    PNG is ``images/<hash>.png`` in the run directory when the frame is the image shown)."""
    from PIL import Image

    from vista_rl.store import image_hash

    return {"image": image_hash(Image.fromarray(to_rgb(value))), "shape": list(value.shape)}


def compact(value: Any) -> Any:
    """``value`` as small JSON-ready data: images by reference, big arrays by shape and dtype."""
    if isinstance(value, np.ndarray):
        if is_image(value):
            return image_ref(value)
        if value.size > SMALL_ARRAY:
            return {"array": list(value.shape), "dtype": str(value.dtype)}
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(key): compact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) > SMALL_ARRAY:
            return {"items": len(value)}
        return [compact(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)[:200]


@dataclass
class ObservationParts:
    """One observation split for the prompt."""

    images: list[np.ndarray] = field(default_factory=list)
    prompt: list[str] = field(default_factory=list)  # mission-like text, "key: text"
    text: list[str] = field(default_factory=list)  # small values, "key: value"


def _as_text(value: Any) -> str | None:
    if isinstance(value, np.ndarray):
        if value.size > PROMPT_ARRAY:
            return None
        return np.array2string(value, precision=4, separator=", ")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (int, bool)):
        return str(value)
    return None


def split(observation: Any, name: str = "observation") -> ObservationParts:
    """Images, prompt text and small values of ``observation`` (nested dicts and tuples flattened
    with dotted names)."""
    parts = ObservationParts()
    _walk(observation, name, parts, top=True)
    return parts


def _walk(value: Any, name: str, parts: ObservationParts, top: bool = False) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, str(key) if top else f"{name}.{key}", parts)
        return
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            _walk(item, f"{name}[{index}]", parts)
        return
    if is_image(value):
        parts.images.append(to_rgb(value))
        return
    if isinstance(value, str):
        leaf = name.rsplit(".", 1)[-1].lower()
        (parts.prompt if leaf in TEXT_KEYS else parts.text).append(f"{name}: {value[:500]}")
        return
    text = _as_text(value)
    if text is not None:
        parts.text.append(f"{name}: {text}")


def same(a: Any, b: Any) -> bool:
    """Structural equality of two observations (arrays compared by value)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)

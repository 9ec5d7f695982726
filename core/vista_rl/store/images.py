"""Content hashes and PNG files for images, so a trajectory stores each distinct image once."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from PIL import Image

HASH_CHARS = 24
PNG_COMPRESS_LEVEL = 1  # zlib level: 3-4x faster than the default 6 for slightly larger files


_CACHED_HASH = "_vista_content_hash"
"""Attribute on a PIL image holding ``(mode, size, hash)`` once :func:`image_hash` has computed it."""


def image_hash(image: Image.Image) -> str:
    """A hash of the pixels, mode and size: equal images get equal names whatever PNG encoder
    settings wrote them, and hashing raw pixels is cheaper than encoding PNG first.

    The hash is computed once per image object and kept on it: the rollout engine (token views),
    the store and the model backends all name the same images, and a multi-turn episode would
    otherwise hash its whole history again every turn.  An observation's images are treated as
    immutable once emitted (every core path makes new images: crops, renders); a cached hash whose
    mode or size no longer match the image is recomputed."""
    cached = getattr(image, _CACHED_HASH, None)
    if isinstance(cached, tuple) and cached[0] == image.mode and cached[1] == image.size:
        return str(cached[2])
    digest = hashlib.sha256()
    digest.update(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    ref = digest.hexdigest()[:HASH_CHARS]
    with contextlib.suppress(AttributeError):  # an object that takes no attributes: hashed each time
        setattr(image, _CACHED_HASH, (image.mode, image.size, ref))
    return ref


def save_image(image: Image.Image, directory: Path, ref: str | None = None) -> str:
    """Write ``image`` as ``directory/<hash>.png`` unless it is already there; return the hash.
    Written to a temporary name first so a crash never leaves a truncated PNG under a real name."""
    ref = ref or image_hash(image)
    path = directory / f"{ref}.png"
    if not path.exists():
        tmp = directory / f".{ref}.{os.getpid()}.tmp"
        image.save(tmp, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
        os.replace(tmp, path)
    return ref


def image_path(directory: Path, ref: str) -> Path:
    return directory / f"{ref}.png"

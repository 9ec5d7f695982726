"""Content hashes and PNG files for images, so a trajectory stores each distinct image once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PIL import Image

HASH_CHARS = 24
PNG_COMPRESS_LEVEL = 1  # zlib level: 3-4x faster than the default 6 for slightly larger files


def image_hash(image: Image.Image) -> str:
    """A hash of the pixels, mode and size: equal images get equal names whatever PNG encoder
    settings wrote them, and hashing raw pixels is cheaper than encoding PNG first."""
    digest = hashlib.sha256()
    digest.update(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()[:HASH_CHARS]


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

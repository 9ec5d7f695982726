"""What one request may cost a VISTA server (``vista serve``, ``vista tool-server``), in one place.

A request's bytes say little about what serving it costs: a 0.4 MB PNG decodes to 12000x12000
pixels (430 MB), a 115-byte raw-image header can claim 16000x16000 RGBA (1 GB allocated before the
bytes are found missing), and a 60 MB JSON body of tiny values parses into gigabytes of Python
objects.  So every cost is checked from what is cheap to read before it is paid:

- images: :func:`open_image` reads the header only (PIL opens lazily), refuses formats outside
  :data:`ALLOWED_IMAGE_FORMATS` (no EPS/PSD decoders run on client bytes) and charges the pixel
  count to an :class:`ImageBudget` (per image, per request, number of images) before decoding;
  :func:`check_raw_image` does the same for raw pixel payloads (mode + size + bytes), checking that
  the bytes match the claimed size before anything is allocated;
- bodies: :func:`json_values_bound` bounds how many values a JSON body holds by counting bytes,
  so a body that would parse into millions of objects is refused without parsing it;
- memory: :func:`release_memory` gives freed memory back to the OS after a large request
  (``gc.collect`` plus glibc's ``malloc_trim``: without it, 6.7 GB of a finished request stayed).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import io
import sys
import threading
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

DEFAULT_MAX_IMAGE_PIXELS = 4096 * 4096
DEFAULT_MAX_REQUEST_PIXELS = 2 * 4096 * 4096
DEFAULT_MAX_IMAGES = 32
ALLOWED_IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
#: bytes per pixel of the raw modes the wire formats carry ("1" packs 8 pixels per byte, per row)
RAW_MODE_BYTES = {"RGB": 3, "RGBA": 4, "L": 1, "LA": 2, "P": 1, "I;16": 2, "CMYK": 4, "1": 0}
MAX_SIDE = 1 << 16


class ImageLimitError(ValueError):
    """An image (or a request's images together) exceeds a limit; the text names the limit."""


class ImageFormatError(ValueError):
    """Bytes that do not hold an image this server decodes; the text says why."""


@dataclass(frozen=True)
class ImageLimits:
    """The image limits of one server: pixels per image, pixels per request, images per request."""

    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_images: int = DEFAULT_MAX_IMAGES

    def budget(self) -> ImageBudget:
        """A fresh budget for one request."""
        return ImageBudget(self)


class ImageBudget:
    """What one request has spent of its :class:`ImageLimits`; :meth:`admit` is called with an
    image's size *before* it is decoded and raises :class:`ImageLimitError` past any limit."""

    def __init__(self, limits: ImageLimits) -> None:
        self.limits = limits
        self.images = 0
        self.pixels = 0

    def admit(self, width: int, height: int, what: str = "image") -> None:
        limits = self.limits
        if width < 1 or height < 1 or width > MAX_SIDE or height > MAX_SIDE:
            raise ImageLimitError(f"{what}: a {width}x{height} image is not a valid size (each side 1..{MAX_SIDE})")
        pixels = width * height
        if pixels > limits.max_image_pixels:
            raise ImageLimitError(f"{what}: image of {width}x{height} ({pixels:,} pixels) exceeds this server's "
                                  f"limit of {limits.max_image_pixels:,} pixels per image; resize it before sending")
        if self.images + 1 > limits.max_images:
            raise ImageLimitError(f"{what}: more than {limits.max_images} images in one request exceed this "
                                  "server's limit")
        if self.pixels + pixels > limits.max_request_pixels:
            raise ImageLimitError(f"{what}: the request's images hold more than {limits.max_request_pixels:,} "
                                  "pixels together, this server's limit per request; send fewer or smaller images")
        self.images += 1
        self.pixels += pixels


def open_image(data: bytes, budget: ImageBudget, what: str = "image") -> Image.Image:
    """Decode encoded image ``data`` (PNG, JPEG, WebP, GIF, BMP) once its header's size fits
    ``budget``.  Raises :class:`ImageLimitError` or :class:`ImageFormatError` (both ``ValueError``)."""
    try:
        image = Image.open(io.BytesIO(data), formats=ALLOWED_IMAGE_FORMATS)
    except Image.DecompressionBombError as exc:  # past PIL's own bomb limit, before our check
        raise ImageLimitError(f"{what}: image too large: {exc}") from None
    except UnidentifiedImageError:
        raise ImageFormatError(f"{what}: not a readable image (accepted formats: "
                               f"{', '.join(ALLOWED_IMAGE_FORMATS)})") from None
    except Exception as exc:  # noqa: BLE001 - malformed headers raise many kinds; all are the client's
        raise ImageFormatError(f"{what}: not a readable image: {type(exc).__name__}: {exc}") from None
    width, height = image.size
    budget.admit(width, height, what)
    try:
        image.load()
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt pixel data
        raise ImageFormatError(f"{what}: the image data is damaged: {type(exc).__name__}: {exc}") from None
    return image


def raw_image_bytes(mode: str, width: int, height: int) -> int:
    """How many bytes ``Image.frombytes(mode, (width, height), data)`` reads."""
    if mode == "1":
        return (width + 7) // 8 * height
    return RAW_MODE_BYTES[mode] * width * height


def check_raw_image(mode: Any, size: Any, data: Any, budget: ImageBudget, what: str = "image") -> tuple[int, int]:
    """Check a raw pixel payload's header against its bytes and ``budget`` before anything is
    allocated; returns ``(width, height)``.  PIL's ``frombytes`` allocates the claimed size first
    and only then finds the bytes missing, so this check must come first."""
    if mode not in RAW_MODE_BYTES:
        raise ImageFormatError(f"{what}: raw mode {str(mode)[:20]!r} is not one of {sorted(RAW_MODE_BYTES)}")
    if not (isinstance(size, (list, tuple)) and len(size) == 2
            and all(isinstance(side, int) and not isinstance(side, bool) for side in size)):
        raise ImageFormatError(f"{what}: a raw image needs a 'size' of two integers [width, height]")
    if not isinstance(data, (bytes, bytearray)):
        raise ImageFormatError(f"{what}: raw image 'data' must be binary")
    width, height = int(size[0]), int(size[1])
    budget.admit(width, height, what)
    expected = raw_image_bytes(mode, width, height)
    if len(data) != expected:
        raise ImageFormatError(f"{what}: a {mode} image of {width}x{height} needs {expected:,} bytes, got {len(data):,}")
    return width, height


def json_values_bound(raw: bytes) -> int:
    """An upper bound on how many values a JSON text holds, from its bytes alone (each value past
    a container's first follows a comma), so a body that would parse into millions of objects can
    be refused before ``json.loads`` builds them.  Separators inside strings only raise the bound."""
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1


_trim_lock = threading.Lock()
_malloc_trim: Any = None


def _libc_malloc_trim() -> Any:
    global _malloc_trim
    if _malloc_trim is None:
        trim: Any = False
        if sys.platform.startswith("linux"):
            try:
                trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                trim = False
        _malloc_trim = trim
    return _malloc_trim


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc only; elsewhere just the
    collection).  Call it after a large request, once its references are dropped."""
    with _trim_lock:
        gc.collect()
        trim = _libc_malloc_trim()
        if trim:
            trim(0)


def limit_decompression(max_pixels: int) -> None:
    """Lower PIL's process-wide decompression-bomb limit to ``max_pixels`` (never raise it): a
    defence in depth for server processes, behind the explicit checks above."""
    current = Image.MAX_IMAGE_PIXELS
    if current is None or current > max_pixels:
        Image.MAX_IMAGE_PIXELS = max_pixels

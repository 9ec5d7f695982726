"""Find an observation image whose content sits in one corner of a constant canvas.

Why: a renderer that draws a 200x200 maze into an 800x800 black canvas passes every functional
check (the env is deterministic, the oracle wins), yet the model sees mostly black pixels and a
maze shrunk by the processor's resize.  The author only notices by looking; this catches the common
form of that bug.  It is a warning, never a failure, and it fires only when the empty part is one
exact colour and the content touches a corner on every seed checked, so a small object drawn at
random places on a plain background (a dot, a digit) does not trip it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageChops

#: Images smaller than this (either side) are not judged: icons and test images are legitimately tiny.
MIN_SIDE = 32
#: Content covering at most this share of the image area counts as "a small corner".
MAX_FRACTION = 0.25


@dataclass(frozen=True)
class CorneredContent:
    """Content of one image confined to a corner: where, how large, and the border's colour."""

    corner: str
    box: tuple[int, int, int, int]
    fraction: float
    background: tuple[int, ...]


def _corner_of(box: tuple[int, int, int, int], width: int, height: int) -> str | None:
    """The image corner the box touches (within 2% of a side, at least 2 pixels), if any."""
    left, top, right, bottom = box
    slack_x, slack_y = max(2, width // 50), max(2, height // 50)
    vertical = "top" if top <= slack_y else "bottom" if bottom >= height - slack_y else None
    horizontal = "left" if left <= slack_x else "right" if right >= width - slack_x else None
    return f"{vertical}-{horizontal}" if vertical and horizontal else None


def cornered_content(image: Image.Image) -> CorneredContent | None:
    """How the content of ``image`` is confined to a corner of a constant canvas, or ``None``.

    Each image corner's colour is tried as the background: the content is every pixel of another
    colour, and the image is flagged when that content covers at most :data:`MAX_FRACTION` of the
    area and touches a corner of the image.  A constant image has no content and is not flagged.
    """
    rgb = image.convert("RGB")
    width, height = rgb.size
    if width < MIN_SIDE or height < MIN_SIDE:
        return None
    for point in ((0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1)):
        colour = rgb.getpixel(point)
        background = tuple(colour) if isinstance(colour, tuple) else (int(colour or 0),)
        box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, background)).getbbox()
        if box is None:
            return None
        fraction = (box[2] - box[0]) * (box[3] - box[1]) / (width * height)
        corner = _corner_of(box, width, height)
        if fraction <= MAX_FRACTION and corner is not None:
            return CorneredContent(corner, box, fraction, background)
    return None


def cornered_everywhere(first_images: Sequence[Sequence[Image.Image]]) -> list[tuple[int, CorneredContent]]:
    """Image positions whose content is cornered (the same corner) in the first observation of
    every seed: ``(image index, what the first seed shows)``.  ``first_images`` holds one list of
    images per seed."""
    if not first_images:
        return []
    found: list[tuple[int, CorneredContent]] = []
    for index in range(min(len(images) for images in first_images)):
        results = [cornered_content(images[index]) for images in first_images]
        first = results[0]
        if first is not None and all(result is not None and result.corner == first.corner for result in results):
            found.append((index, first))
    return found


def describe(index: int, image_size: tuple[int, int], content: CorneredContent, env_id: str = "ENV_ID") -> str:
    """One warning line for a cornered image, with what to do about it."""
    left, top, right, bottom = content.box
    return (f"image {index} ({image_size[0]}x{image_size[1]}) has content only in its {content.corner} "
            f"{right - left}x{bottom - top} pixels ({content.fraction:.0%} of the area) on every seed checked; "
            f"the rest is the constant colour {content.background}. Is the scene drawn into a canvas larger "
            f"than itself? Look at what the model sees: vista check-env {env_id} --sheet sheet.png")

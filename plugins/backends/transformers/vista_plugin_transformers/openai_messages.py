"""OpenAI chat-completion messages to vista messages (for ``vista serve``).

Images must arrive as base64 ``data:`` URLs: the server never fetches remote URLs (no network in
tests, and fetching arbitrary URLs from a model server is a security hole); an ``http(s)`` URL is
refused with a message that says so and how to send the image instead.  An image's size is read
from its header before any pixel is decoded and charged to the request's budget
(:class:`vista_rl.limits.ImageBudget`: pixels per image, pixels and images per request), so a
20000x20000 PNG (1 MB on the wire, 1.2 GB decoded) or 32 blank 4096x4096 PNGs (2.5 MB on the wire,
8-10 GB once decoded and processed) are refused without being decoded.  Only PNG, JPEG, WebP, GIF
and BMP are decoded.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from PIL import Image

from vista_rl import IMAGE_PLACEHOLDER, Chat, Message
from vista_rl.limits import (
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_IMAGES,
    DEFAULT_MAX_REQUEST_PIXELS,
    ImageBudget,
    ImageLimitError,
    ImageLimits,
    open_image,
)

__all__ = ["DEFAULT_MAX_IMAGES", "DEFAULT_MAX_IMAGE_PIXELS", "DEFAULT_MAX_REQUEST_PIXELS", "MessageFormatError",
           "decode_data_url", "openai_messages_to_chat"]
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


class MessageFormatError(ValueError):
    """A request's messages cannot be turned into a vista chat; the text says what to fix."""


def decode_data_url(url: str, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                    budget: ImageBudget | None = None) -> Image.Image:
    """An RGB PIL image from a ``data:image/...;base64,...`` URL, refused before decoding when its
    header says it holds more than ``max_pixels`` pixels or more than ``budget`` has left."""
    if url[:8].lower().startswith(("http://", "https://")):
        raise MessageFormatError(
            f"image_url {url[:60]!r}: vista serve has no network access and never fetches image URLs; download "
            "the image yourself and send it inline as a base64 data: URL (data:image/png;base64,...)")
    if not url.startswith("data:"):
        raise MessageFormatError(f"image_url must be a base64 data: URL, got {url[:40]!r}")
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        raise MessageFormatError("image data URL must be base64 encoded (data:image/png;base64,...)")
    if budget is None:
        budget = ImageLimits(max_image_pixels=max_pixels, max_request_pixels=max_pixels, max_images=1).budget()
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MessageFormatError(f"image data URL does not hold a readable image: {exc}") from None
    try:
        image = open_image(data, budget, "image_url")
        return image.convert("RGB")
    except ImageLimitError as exc:
        raise MessageFormatError(f"image too large: {exc}") from None
    except ValueError as exc:
        raise MessageFormatError(f"image data URL does not hold a readable image: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a malformed image file must be the client's 400, never a 500
        raise MessageFormatError(f"image data URL does not hold a readable image: {type(exc).__name__}: {exc}") from None


def _content_to_text_and_images(content: Any, budget: ImageBudget) -> tuple[str, list[Image.Image]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        parts: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        raise MessageFormatError("message content must be a string or a list of content parts")
    pieces: list[str] = []
    images: list[Image.Image] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = str(part.get("text", ""))
            if IMAGE_PLACEHOLDER in text:
                raise MessageFormatError(
                    f"text parts may not contain the literal {IMAGE_PLACEHOLDER}; send images as image_url parts"
                )
            pieces.append(text)
        elif kind == "image_url":
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            if not isinstance(url, str):
                raise MessageFormatError("image_url part needs image_url.url")
            images.append(decode_data_url(url, budget=budget))
            pieces.append(IMAGE_PLACEHOLDER)
        else:
            raise MessageFormatError(f"unsupported content part type {kind!r} (use text or image_url)")
    return "".join(pieces), images


def openai_messages_to_chat(messages: list[dict[str, Any]], *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                            max_images: int = DEFAULT_MAX_IMAGES,
                            max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS) -> Chat:
    """Convert OpenAI ``messages`` to a vista chat, keeping every image where it stood.  Images
    are charged to one budget for the request, so the request's total pixels are bounded too."""
    if not messages:
        raise MessageFormatError("messages must not be empty")
    image_parts = sum(1 for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
                      for part in message["content"] if isinstance(part, dict) and part.get("type") == "image_url")
    if image_parts > max_images:
        raise MessageFormatError(f"{image_parts} images in one request exceed this server's limit of {max_images}")
    budget = ImageLimits(max_image_pixels, max_request_pixels, max_images).budget()
    chat: Chat = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise MessageFormatError(f"messages[{index}] must be an object")
        role = _ROLES.get(str(message.get("role")))
        if role is None:
            raise MessageFormatError(f"messages[{index}].role {message.get('role')!r} is not one of {sorted(_ROLES)}")
        text, images = _content_to_text_and_images(message.get("content"), budget)
        chat.append(Message(role, text, images))  # type: ignore[arg-type]
    return chat

"""OpenAI chat-completion messages to vista messages (for ``vista serve``).

Images must arrive as base64 ``data:`` URLs: the server never fetches remote URLs (no network in
tests, and fetching arbitrary URLs from a model server is a security hole).  An image's size is read
from its header before any pixel is decoded, so a 20000x20000 PNG (1 MB on the wire, 1.2 GB decoded)
is refused without being decoded.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from PIL import Image, UnidentifiedImageError

from vista_rl import IMAGE_PLACEHOLDER, Chat, Message

DEFAULT_MAX_IMAGE_PIXELS = 4096 * 4096
DEFAULT_MAX_IMAGES = 32
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


class MessageFormatError(ValueError):
    """A request's messages cannot be turned into a vista chat; the text says what to fix."""


def decode_data_url(url: str, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Image.Image:
    """A PIL image from a ``data:image/...;base64,...`` URL, refused before decoding when its
    header says it holds more than ``max_pixels`` pixels."""
    if not url.startswith("data:"):
        raise MessageFormatError(f"image_url must be a base64 data: URL, got {url[:40]!r}")
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        raise MessageFormatError("image data URL must be base64 encoded (data:image/png;base64,...)")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(payload, validate=True)))
        width, height = image.size
        if width * height > max_pixels:
            raise MessageFormatError(f"image of {width}x{height} ({width * height:,} pixels) exceeds this server's "
                                     f"limit of {max_pixels:,} pixels; resize it before sending")
        image.load()
        return image.convert("RGB")
    except MessageFormatError:
        raise
    except Image.DecompressionBombError as exc:  # past PIL's own limit: refused before our size check
        raise MessageFormatError(f"image too large: {exc} (this server's limit is {max_pixels:,} pixels)") from None
    except (binascii.Error, UnidentifiedImageError, OSError) as exc:
        raise MessageFormatError(f"image data URL does not hold a readable image: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a malformed image file must be the client's 400, never a 500
        raise MessageFormatError(f"image data URL does not hold a readable image: {type(exc).__name__}: {exc}") from None


def _content_to_text_and_images(content: Any, max_pixels: int) -> tuple[str, list[Image.Image]]:
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
            images.append(decode_data_url(url, max_pixels))
            pieces.append(IMAGE_PLACEHOLDER)
        else:
            raise MessageFormatError(f"unsupported content part type {kind!r} (use text or image_url)")
    return "".join(pieces), images


def openai_messages_to_chat(messages: list[dict[str, Any]], *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                            max_images: int = DEFAULT_MAX_IMAGES) -> Chat:
    """Convert OpenAI ``messages`` to a vista chat, keeping every image where it stood."""
    if not messages:
        raise MessageFormatError("messages must not be empty")
    image_parts = sum(1 for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
                      for part in message["content"] if isinstance(part, dict) and part.get("type") == "image_url")
    if image_parts > max_images:
        raise MessageFormatError(f"{image_parts} images in one request exceed this server's limit of {max_images}")
    chat: Chat = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise MessageFormatError(f"messages[{index}] must be an object")
        role = _ROLES.get(str(message.get("role")))
        if role is None:
            raise MessageFormatError(f"messages[{index}].role {message.get('role')!r} is not one of {sorted(_ROLES)}")
        text, images = _content_to_text_and_images(message.get("content"), max_image_pixels)
        chat.append(Message(role, text, images))  # type: ignore[arg-type]
    return chat

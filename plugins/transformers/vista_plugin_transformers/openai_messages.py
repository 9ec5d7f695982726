"""OpenAI chat-completion messages to vista messages (for ``vista serve``).

Images must arrive as base64 ``data:`` URLs: the server never fetches remote URLs (no network in
tests, and fetching arbitrary URLs from a model server is a security hole).
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from PIL import Image, UnidentifiedImageError

from vista_rl import IMAGE_PLACEHOLDER, Chat, Message

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


class MessageFormatError(ValueError):
    """A request's messages cannot be turned into a vista chat; the text says what to fix."""


def decode_data_url(url: str) -> Image.Image:
    """A PIL image from a ``data:image/...;base64,...`` URL."""
    if not url.startswith("data:"):
        raise MessageFormatError(f"image_url must be a base64 data: URL, got {url[:40]!r}")
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        raise MessageFormatError("image data URL must be base64 encoded (data:image/png;base64,...)")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(payload, validate=True)))
        image.load()
    except (binascii.Error, UnidentifiedImageError, OSError) as exc:
        raise MessageFormatError(f"image data URL does not hold a readable image: {exc}") from exc
    return image.convert("RGB")


def _content_to_text_and_images(content: Any) -> tuple[str, list[Image.Image]]:
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
            images.append(decode_data_url(url))
            pieces.append(IMAGE_PLACEHOLDER)
        else:
            raise MessageFormatError(f"unsupported content part type {kind!r} (use text or image_url)")
    return "".join(pieces), images


def openai_messages_to_chat(messages: list[dict[str, Any]]) -> Chat:
    """Convert OpenAI ``messages`` to a vista chat, keeping every image where it stood."""
    if not messages:
        raise MessageFormatError("messages must not be empty")
    chat: Chat = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise MessageFormatError(f"messages[{index}] must be an object")
        role = _ROLES.get(str(message.get("role")))
        if role is None:
            raise MessageFormatError(f"messages[{index}].role {message.get('role')!r} is not one of {sorted(_ROLES)}")
        text, images = _content_to_text_and_images(message.get("content"))
        chat.append(Message(role, text, images))  # type: ignore[arg-type]
    return chat

"""How a tool call and its result cross a process boundary (msgpack over HTTP).

Images travel as raw pixels or PNG through the env server's codec (no base64).  Context metadata
may hold images (``full_resolution``) and odd values; images are kept, other non-plain values
become JSON-friendly (``vista_rl._jsonable``), so nothing an env puts there can fail a call.
"""

from __future__ import annotations

from typing import Any

from PIL import Image
from vista_plugin_envserver.codec import CodecError, decode_image, encode_image, wire_text

from vista_rl import ToolContext, ToolResult

_IMAGE_KEY = "__vista_image__"
MAX_DEPTH = 32


def plain(value: Any) -> Any:
    """A msgpack-friendly stand-in for a value msgpack cannot carry (sets, numpy/torch values,
    pydantic models); anything else becomes its ``str``."""
    if isinstance(value, (set, frozenset)):
        return list(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    try:
        if hasattr(value, "tolist"):
            return value.tolist()
    except Exception:  # noqa: BLE001 - a broken tolist must not fail the call
        pass
    return str(value)


def encode_value(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return "<too deep>"
    if isinstance(value, Image.Image):
        return {_IMAGE_KEY: encode_image(value)}
    if isinstance(value, str):
        return wire_text(value)
    if value is None or isinstance(value, (bool, int, float, bytes)):
        return value
    if isinstance(value, dict):
        return {wire_text(str(key)): encode_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_value(item, depth + 1) for item in value]
    converted = plain(value)
    return converted if isinstance(converted, str) else encode_value(converted, depth + 1)


def decode_value(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if isinstance(value, dict):
        if set(value) == {_IMAGE_KEY}:
            return decode_image(value[_IMAGE_KEY])
        return {key: decode_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_value(item, depth + 1) for item in value]
    return value


def encode_call(tool: str, arguments: Any, context: ToolContext) -> dict[str, Any]:
    return {"tool": tool, "arguments": encode_value(arguments),
            "images": [encode_image(image) for image in context.images],
            "metadata": encode_value(context.metadata)}


def decode_call(payload: Any) -> tuple[str, Any, ToolContext]:
    if not isinstance(payload, dict) or not isinstance(payload.get("tool"), str):
        raise CodecError("a call must be a map with a 'tool' id")
    images = payload.get("images") or []
    metadata = decode_value(payload.get("metadata") or {})
    if not isinstance(images, list) or not isinstance(metadata, dict):
        raise CodecError("'images' must be a list and 'metadata' a map")
    return payload["tool"], decode_value(payload.get("arguments")), ToolContext(
        images=[decode_image(item) for item in images], metadata=metadata)


def encode_result(result: ToolResult) -> dict[str, Any]:
    return {"text": wire_text(result.text), "images": [encode_image(image) for image in result.images],
            "error": bool(result.error), "metadata": encode_value(result.metadata)}


def decode_result(payload: Any) -> ToolResult:
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise CodecError("a tool result must be a map with a 'text' string")
    metadata = decode_value(payload.get("metadata") or {})
    return ToolResult(text=payload["text"], images=[decode_image(item) for item in payload.get("images") or []],
                      error=bool(payload.get("error")), metadata=metadata if isinstance(metadata, dict) else {})

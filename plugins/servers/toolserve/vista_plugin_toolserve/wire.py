"""How a tool call and its result cross a process boundary (msgpack over HTTP).

Images travel as raw pixels or PNG through the env server's codec (no base64).  Context metadata
may hold images (``full_resolution``) and odd values; images are kept, other non-plain values
become JSON-friendly (``vista_rl._jsonable``), so nothing an env puts there can fail a call.

A call comes from a client, so decoding it is bounded before anything is allocated
(:func:`unpack_call`, :func:`decode_call`): the msgpack body may hold at most ``max_values``
values in all, every image (in ``images`` or anywhere in ``metadata``) is charged to one
:class:`vista_rl.limits.ImageBudget` from its header, and a raw image's bytes must match its claimed
mode and size before ``Image.frombytes`` runs (a 115-byte header claiming 16000x16000 RGBA used to
allocate 1 GB first).
"""

from __future__ import annotations

from typing import Any

import msgpack
from PIL import Image
from vista_plugin_envserver.codec import CodecError, decode_image, encode_image, wire_text

from vista_rl import ToolContext, ToolResult
from vista_rl.limits import ImageBudget, ImageLimits, check_raw_image, open_image

_IMAGE_KEY = "__vista_image__"
MAX_DEPTH = 32
MAX_VALUES = 1_000_000
#: results come from the server this client chose: only the header/bytes consistency is checked
RESULT_LIMITS = ImageLimits(max_image_pixels=1 << 32, max_request_pixels=1 << 40, max_images=1 << 20)


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


def decode_image_checked(payload: Any, budget: ImageBudget, what: str = "image") -> Image.Image:
    """One wire image, its size charged to ``budget`` (and raw bytes matched to it) before decoding."""
    if not isinstance(payload, dict) or "data" not in payload:
        raise CodecError(f"{what}: an image must be a map with 'codec' and 'data'")
    codec, data = payload.get("codec"), payload["data"]
    try:
        if codec == "png":
            if not isinstance(data, bytes):
                raise CodecError(f"{what}: image 'data' must be binary")
            return open_image(data, budget, what)
        if codec == "raw":
            check_raw_image(payload.get("mode"), payload.get("size"), data, budget, what)
    except ValueError as exc:  # ImageLimitError, ImageFormatError, CodecError
        raise CodecError(str(exc)) from None
    return decode_image(payload)


def decode_value(value: Any, depth: int = 0, budget: ImageBudget | None = None) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if isinstance(value, dict):
        if set(value) == {_IMAGE_KEY}:
            return decode_image_checked(value[_IMAGE_KEY], budget or RESULT_LIMITS.budget(), "metadata image")
        return {key: decode_value(item, depth + 1, budget) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_value(item, depth + 1, budget) for item in value]
    return value


def unpack_call(body: bytes, max_values: int = MAX_VALUES) -> Any:
    """Unpack a msgpack body holding at most ``max_values`` values in all (a 64 MB body of empty
    arrays would otherwise become 64 million list objects)."""
    seen = [0]

    def count(container: Any) -> Any:
        seen[0] += len(container) + 1
        if seen[0] > max_values:
            raise CodecError(f"the body holds more than {max_values:,} values, this server's limit")
        return container

    try:
        return msgpack.unpackb(body, raw=False, list_hook=count, object_hook=count,
                               max_array_len=max_values, max_map_len=max_values)
    except CodecError:
        raise
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CodecError(f"body is not valid msgpack: {type(exc).__name__}: {exc}") from None


def encode_call(tool: str, arguments: Any, context: ToolContext) -> dict[str, Any]:
    return {"tool": tool, "arguments": encode_value(arguments),
            "images": [encode_image(image) for image in context.images],
            "metadata": encode_value(context.metadata)}


def decode_call(payload: Any, limits: ImageLimits | None = None) -> tuple[str, Any, ToolContext]:
    """A call's tool id, arguments and context; every image in it is charged to one budget of
    ``limits`` (the defaults of :class:`vista_rl.limits.ImageLimits` when None)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("tool"), str):
        raise CodecError("a call must be a map with a 'tool' id")
    budget = (limits or ImageLimits()).budget()
    images = payload.get("images") or []
    if not isinstance(images, list):
        raise CodecError("'images' must be a list and 'metadata' a map")
    if len(images) > budget.limits.max_images:
        raise CodecError(f"{len(images)} images in one call exceed this server's limit of {budget.limits.max_images}")
    decoded = [decode_image_checked(item, budget, f"images[{index}]") for index, item in enumerate(images)]
    metadata = decode_value(payload.get("metadata") or {}, budget=budget)
    if not isinstance(metadata, dict):
        raise CodecError("'images' must be a list and 'metadata' a map")
    return payload["tool"], decode_value(payload.get("arguments"), budget=budget), ToolContext(
        images=decoded, metadata=metadata)


def encode_result(result: ToolResult) -> dict[str, Any]:
    return {"text": wire_text(result.text), "images": [encode_image(image) for image in result.images],
            "error": bool(result.error), "metadata": encode_value(result.metadata)}


def decode_result(payload: Any) -> ToolResult:
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise CodecError("a tool result must be a map with a 'text' string")
    budget = RESULT_LIMITS.budget()
    metadata = decode_value(payload.get("metadata") or {}, budget=budget)
    images = payload.get("images") or []
    if not isinstance(images, list):
        raise CodecError("a tool result's 'images' must be a list")
    return ToolResult(text=payload["text"], images=[decode_image_checked(item, budget, "result image")
                                                    for item in images],
                      error=bool(payload.get("error")), metadata=metadata if isinstance(metadata, dict) else {})

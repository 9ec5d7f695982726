"""Wire format of the env server: msgpack bodies, images as raw pixel bytes (or PNG) plus shape.

Why not JSON with base64 images (VAGEN's choice)?  Base64 inflates every image by a third and costs
an encode and a decode on each side; msgpack carries the bytes as they are.  ``raw`` (pixels +
mode + size) is the fastest on a local network; ``png`` trades CPU for bandwidth across machines.
"""

from __future__ import annotations

import io
from typing import Any, Literal

import msgpack
from PIL import Image

from vista_rl import Observation, StepResult

ImageEncoding = Literal["raw", "png"]
IMAGE_ENCODINGS: tuple[str, ...] = ("raw", "png")
CONTENT_TYPE = "application/msgpack"
_RAW_MODES = {"RGB", "RGBA", "L", "LA", "P", "1", "I;16", "CMYK"}


class CodecError(ValueError):
    """A payload could not be decoded; the message says which part was wrong."""


def encode_image(image: Image.Image, encoding: ImageEncoding = "raw") -> dict[str, Any]:
    if encoding == "png" or image.mode not in _RAW_MODES:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=1)
        return {"codec": "png", "data": buffer.getvalue()}
    payload: dict[str, Any] = {"codec": "raw", "mode": image.mode, "size": list(image.size),
                               "data": image.tobytes()}
    if image.mode == "P":
        palette = image.getpalette()
        payload["palette"] = bytes(palette) if palette is not None else b""
    return payload


def decode_image(payload: Any) -> Image.Image:
    if not isinstance(payload, dict) or "data" not in payload:
        raise CodecError("an image must be a map with 'codec' and 'data'")
    codec = payload.get("codec")
    data = payload["data"]
    if not isinstance(data, bytes):
        raise CodecError("image 'data' must be binary")
    if codec == "png":
        try:
            opened = Image.open(io.BytesIO(data))
            opened.load()
        except Exception as exc:  # noqa: BLE001 - PIL raises many kinds
            raise CodecError(f"image data is not a valid PNG: {exc}") from None
        return opened
    if codec == "raw":
        mode, size = payload.get("mode"), payload.get("size")
        if mode not in _RAW_MODES or not (isinstance(size, list) and len(size) == 2):
            raise CodecError("a raw image needs a known 'mode' and a 'size' of [width, height]")
        try:
            image = Image.frombytes(mode, (int(size[0]), int(size[1])), data)
        except Exception as exc:  # noqa: BLE001
            raise CodecError(f"raw image bytes do not match mode {mode} and size {size}: {exc}") from None
        if mode == "P" and payload.get("palette"):
            image.putpalette(payload["palette"])
        return image
    raise CodecError(f"unknown image codec {codec!r}; expected one of {', '.join(IMAGE_ENCODINGS)}")


def wire_text(text: str) -> str:
    """``text`` as UTF-8 can carry it: lone surrogates (a ``str`` Python holds but no encoder takes,
    e.g. ``"\\ud800"`` from a byte-level tokenizer) become U+FFFD and split surrogate pairs are
    joined, so one odd character cannot fail a whole msgpack body."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def encode_observation(observation: Observation, encoding: ImageEncoding = "raw") -> dict[str, Any]:
    return {"text": wire_text(observation.text), "images": [encode_image(image, encoding) for image in observation.images]}


def decode_observation(payload: Any) -> Observation:
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise CodecError("an observation must be a map with a 'text' string and an 'images' list")
    images = payload.get("images") or []
    if not isinstance(images, list):
        raise CodecError("observation 'images' must be a list")
    try:
        return Observation(payload["text"], [decode_image(item) for item in images])
    except ValueError as exc:
        raise CodecError(str(exc)) from None


def encode_step(result: StepResult, encoding: ImageEncoding = "raw") -> dict[str, Any]:
    return {
        "observation": encode_observation(result.observation, encoding),
        "reward": result.reward,
        "terminated": result.terminated,
        "truncated": result.truncated,
        "info": result.info,
    }


def decode_step(payload: Any) -> StepResult:
    if not isinstance(payload, dict):
        raise CodecError("a step result must be a map")
    try:
        return StepResult(
            observation=decode_observation(payload.get("observation")),
            reward=float(payload.get("reward", 0.0)),
            terminated=bool(payload.get("terminated", False)),
            truncated=bool(payload.get("truncated", False)),
            info=dict(payload.get("info") or {}),
        )
    except (TypeError, ValueError) as exc:
        raise CodecError(f"bad step result: {exc}") from None


def _to_wire(value: Any) -> Any:
    """Fallback for values msgpack cannot pack (numpy scalars and arrays, tuples-as-keys, sets,
    dataclasses...): info dicts come from arbitrary envs and must never break a response."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Image.Image):
        return encode_image(value, "png")
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def pack(message: Any) -> bytes:
    return msgpack.packb(message, default=_to_wire, use_bin_type=True, strict_types=False)  # type: ignore[no-any-return]


def unpack(body: bytes, max_bytes: int | None = None) -> Any:
    if max_bytes is not None and len(body) > max_bytes:
        raise CodecError(f"body of {len(body)} bytes exceeds the limit of {max_bytes}")
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CodecError(f"body is not valid msgpack: {type(exc).__name__}: {exc}") from None

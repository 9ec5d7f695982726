from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from vista_plugin_envserver.codec import (
    CodecError,
    decode_image,
    decode_observation,
    decode_step,
    encode_image,
    encode_observation,
    encode_step,
    pack,
    unpack,
)

from vista_rl import Observation, StepResult


def _image(mode: str) -> Image.Image:
    pixels = np.random.default_rng(0).integers(0, 255, (12, 20, 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB").convert(mode)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P"])
@pytest.mark.parametrize("encoding", ["raw", "png"])
def test_images_round_trip_pixel_exact(mode: str, encoding: str) -> None:
    image = _image(mode)
    back = decode_image(unpack(pack(encode_image(image, encoding))))  # type: ignore[arg-type]
    assert back.mode == image.mode and back.size == image.size
    assert back.tobytes() == image.tobytes()


def test_raw_encoding_is_binary_not_base64() -> None:
    image = _image("RGB")
    payload = pack(encode_observation(Observation("a <image> b", [image])))
    # the pixels travel as they are: the message is barely larger than the raw bytes
    assert len(payload) < len(image.tobytes()) + 100


def test_step_round_trip_with_numpy_info() -> None:
    result = StepResult(Observation("<image>", [_image("RGB")]), 1.5, True, False,
                        {"pos": np.array([1, 2]), "score": np.float32(0.5), "tags": {"a"}})
    back = decode_step(unpack(pack(encode_step(result))))
    assert back.reward == 1.5 and back.terminated and not back.truncated
    assert back.info == {"pos": [1, 2], "score": 0.5, "tags": ["a"]}
    assert back.observation.images[0].tobytes() == result.observation.images[0].tobytes()


@pytest.mark.parametrize("payload", [
    None,
    {"codec": "raw", "mode": "RGB", "size": [10, 10], "data": b"short"},
    {"codec": "png", "data": b"not a png"},
    {"codec": "jpeg2000", "data": b""},
    {"codec": "raw", "mode": "XYZ", "size": [1, 1], "data": b"\x00"},
])
def test_bad_images_raise_codec_errors(payload: object) -> None:
    with pytest.raises(CodecError):
        decode_image(payload)


def test_placeholder_mismatch_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="placeholder"):
        decode_observation({"text": "<image> <image>", "images": [encode_image(_image("L"))]})


def test_unpack_rejects_garbage_and_oversized() -> None:
    with pytest.raises(CodecError, match="msgpack"):
        unpack(b"\xc1\xc1\xc1")
    with pytest.raises(CodecError, match="limit"):
        unpack(pack({"a": "x" * 100}), max_bytes=10)

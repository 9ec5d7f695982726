from __future__ import annotations

import msgpack
import pytest
from vista_plugin_envserver.codec import CodecError
from vista_plugin_toolserve.wire import decode_call, decode_result, encode_call, encode_result

from vista_rl import ToolContext, ToolResult


def test_call_round_trip_keeps_images_and_metadata(context: ToolContext) -> None:
    body = msgpack.packb(encode_call("mark", {"points": [[1, 2]]}, context), use_bin_type=True)
    tool, arguments, decoded = decode_call(msgpack.unpackb(body, raw=False))
    assert tool == "mark" and arguments == {"points": [[1, 2]]}
    assert [image.tobytes() for image in decoded.images] == [image.tobytes() for image in context.images]
    full = decoded.metadata["full_resolution"]["0"]  # keys become strings; pick_image accepts both
    assert full.size == (192, 128) and full.tobytes() == context.metadata["full_resolution"][0].tobytes()
    assert sorted(decoded.metadata["note"]) == [1, 2]


def test_result_round_trip(context: ToolContext) -> None:
    result = ToolResult("found \ud800 it", [context.images[0]], True, {"boxes": [[1, 2, 3, 4]]})
    back = decode_result(msgpack.unpackb(msgpack.packb(encode_result(result), use_bin_type=True), raw=False))
    assert back.error and back.text == "found \ufffd it" and back.metadata == {"boxes": [[1, 2, 3, 4]]}
    assert back.images[0].tobytes() == context.images[0].tobytes()


@pytest.mark.parametrize("payload", [None, {"tool": 3}, {"tool": "x", "images": "no"},
                                     {"tool": "x", "images": [{"codec": "raw", "data": "str"}]}])
def test_bad_calls_raise_codec_errors(payload: object) -> None:
    with pytest.raises(CodecError):
        decode_call(payload)

"""Issue 22 item 9: a tool server bounds what one call costs before paying it (real server, 127.0.0.1)."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgpack
import pytest
from PIL import Image
from vista_plugin_envserver.codec import CONTENT_TYPE, CodecError
from vista_plugin_toolserve.http_client import LocalToolServer
from vista_plugin_toolserve.wire import decode_call, encode_call, unpack_call

from vista_rl import ToolContext
from vista_rl.limits import ImageLimits


@pytest.fixture(scope="module")
def server() -> Iterator[LocalToolServer]:
    running = LocalToolServer("mark", {}, threads=2)
    yield running
    running.close()


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` with almost no pixel data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def _call(server: LocalToolServer, images: list[dict[str, object]], metadata: dict[str, object] | None = None,
          ) -> httpx.Response:
    body = msgpack.packb({"tool": "mark", "arguments": {"points": [[1, 1]], "image": 0}, "images": images,
                          "metadata": metadata or {}}, use_bin_type=True)
    return httpx.post(f"{server.url}/call", content=body, headers={"content-type": CONTENT_TYPE}, timeout=60)


def test_a_raw_header_claiming_a_gigabyte_is_refused_without_allocating_it(server: LocalToolServer) -> None:
    if server.pid is None or not Path(f"/proc/{server.pid}/status").exists():
        pytest.skip("needs /proc")
    before = _peak_rss_mb(server.pid)
    bomb = {"codec": "raw", "mode": "RGBA", "size": [16000, 16000], "data": b"\x00" * 16}
    response = _call(server, [bomb])
    assert response.status_code == 400 and "16000x16000" in response.json()["error"]
    # this used to allocate the claimed 976 MB before finding the bytes missing
    assert _peak_rss_mb(server.pid) - before < 200
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def test_image_limits_and_a_png_bomb_are_400s(server: LocalToolServer) -> None:
    png_bomb = {"codec": "png", "data": _png_header_only(12000, 12000)}
    refused = _call(server, [png_bomb])  # PIL's bomb limit (lowered by the server) or the header check
    assert refused.status_code == 400 and "too large" in refused.json()["error"]
    # a bomb hidden in metadata is charged to the same budget
    hidden = _call(server, [], {"full_resolution": {"0": {"__vista_image__": png_bomb}}})
    assert hidden.status_code == 400 and "metadata image" in hidden.json()["error"]
    short = {"codec": "raw", "mode": "RGB", "size": [64, 64], "data": b"\x00" * 100}
    mismatch = _call(server, [short])
    assert mismatch.status_code == 400 and "needs 12,288 bytes, got 100" in mismatch.json()["error"]
    good = Image.new("RGB", (64, 64), "white")
    ok = _call(server, [{"codec": "raw", "mode": "RGB", "size": [64, 64], "data": good.tobytes()}])
    assert ok.status_code == 200, ok.text


def test_an_oversized_body_is_413_and_the_server_still_answers(server: LocalToolServer) -> None:
    huge = b"\x00" * (65 * 1024 * 1024)
    response = httpx.post(f"{server.url}/call", content=huge, headers={"content-type": CONTENT_TYPE}, timeout=60)
    assert response.status_code == 413
    streamed = httpx.post(f"{server.url}/call", content=iter([b"\x00" * (1 << 20)] * 65),
                          headers={"content-type": CONTENT_TYPE}, timeout=60)
    assert streamed.status_code == 413
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def test_the_wire_decoder_bounds_values_and_pixels(context: ToolContext) -> None:
    with pytest.raises(CodecError, match="more than 1,000 values"):
        unpack_call(msgpack.packb([[[]] * 100] * 50), max_values=1000)
    payload = encode_call("mark", {}, context)
    tight = ImageLimits(max_image_pixels=192 * 128, max_request_pixels=192 * 128, max_images=4)
    with pytest.raises(CodecError, match="pixels together"):  # the metadata image does not fit after images[0]
        decode_call(unpack_call(msgpack.packb(payload, use_bin_type=True)), tight)
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="TIFF")
    with pytest.raises(CodecError, match="accepted formats"):
        decode_call({"tool": "mark", "images": [{"codec": "png", "data": buffer.getvalue()}]})

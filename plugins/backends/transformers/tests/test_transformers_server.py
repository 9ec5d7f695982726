"""``vista serve``'s app over real HTTP on 127.0.0.1: OpenAI shapes, token ids, batching, errors."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.server import BackgroundServer, ServeLimits, create_app

from vista_rl import Chat, Generation, Message, ModelBackend, SamplingParams, image_to_data_url


def _image_request(colour: str, **extra: Any) -> dict[str, Any]:
    url = image_to_data_url(Image.new("RGB", (112, 112), colour))
    return {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "Answer with a direction."},
            {"role": "user", "content": [{"type": "text", "text": "Grid: "},
                                         {"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": " Move?"}]},
        ],
        "temperature": 0.0,
        "max_tokens": 6,
        **extra,
    }


def test_health_and_models(server: BackgroundServer) -> None:
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    assert [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]] == ["tiny"]


def test_chat_completion_matches_the_backend(server: BackgroundServer, backend: TransformersBackend) -> None:
    response = httpx.post(f"{server.url}/v1/chat/completions",
                          json=_image_request("red", logprobs=True, return_token_ids=True), timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    choice = body["choices"][0]
    chat = [Message("system", "Answer with a direction."),
            Message("user", "Grid: <image> Move?", [Image.new("RGB", (112, 112), "red")])]
    direct = backend.generate([chat], SamplingParams(temperature=0.0, max_tokens=6))[0][0]
    assert choice["message"]["content"] == direct.text
    assert choice["token_ids"] == direct.token_ids
    assert body["prompt_token_ids"] == direct.prompt_token_ids
    assert [entry["logprob"] for entry in choice["logprobs"]["content"]] == pytest.approx(direct.logprobs, abs=1e-4)
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 6


def test_plain_request_has_no_extras_and_n_works(server: BackgroundServer) -> None:
    body = httpx.post(f"{server.url}/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "hello"}], "n": 2, "temperature": 1.0, "max_tokens": 4,
        "seed": 3}).json()
    assert len(body["choices"]) == 2
    assert "prompt_token_ids" not in body and "token_ids" not in body["choices"][0]
    assert body["choices"][0]["logprobs"] is None


def test_concurrent_requests_share_generate_calls(server: BackgroundServer) -> None:
    before = httpx.get(f"{server.url}/stats").json()
    colours = ["red", "green", "blue", "white", "black", "yellow", "purple", "orange"]
    with concurrent.futures.ThreadPoolExecutor(len(colours)) as pool:
        responses = list(pool.map(
            lambda colour: httpx.post(f"{server.url}/v1/chat/completions", json=_image_request(colour), timeout=60),
            colours))
    assert all(r.status_code == 200 for r in responses)
    after = httpx.get(f"{server.url}/stats").json()
    assert after["requests"] - before["requests"] == len(colours)
    assert after["generate_calls"] - before["generate_calls"] < len(colours)
    assert after["largest_batch"] > 1


@pytest.mark.parametrize(("payload", "status", "fragment"), [
    ({"messages": [{"role": "user", "content": "a literal <image> tag"}]}, 400, "literal <image>"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url",
                                                 "image_url": {"url": "http://example.com/a.png"}}]}]}, 400, "no network"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url",
                                                 "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}]}]},
     400, "readable image"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "role"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 400, "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "model": "other"}, 404, "not served"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}, 400, "needs logprobs: true"),
])
def test_bad_requests_get_clear_errors(server: BackgroundServer, payload: dict[str, Any], status: int,
                                       fragment: str) -> None:
    response = httpx.post(f"{server.url}/v1/chat/completions", json=payload, timeout=60)
    assert response.status_code == status
    assert fragment in response.json()["error"]["message"]


class _ExplodingBackend(ModelBackend):
    """A backend whose generate raises: the server must answer 500 with the reason, and keep serving."""

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("out of memory (simulated)")
        return [[Generation(text="ok")] for _ in chats]


def test_generation_failure_is_a_500_and_the_server_recovers() -> None:
    with BackgroundServer(create_app(_ExplodingBackend(), "boom")) as running:
        request = {"messages": [{"role": "user", "content": "hi"}]}
        failed = httpx.post(f"{running.url}/v1/chat/completions", json=request, timeout=30)
        assert failed.status_code == 500
        assert "out of memory (simulated)" in failed.json()["error"]["message"]
        recovered = httpx.post(f"{running.url}/v1/chat/completions", json=request, timeout=30)
        assert recovered.json()["choices"][0]["message"]["content"] == "ok"


# ---------------------------------------------------------------- issue 13 item 6: hostile requests

def _png_header_only(width: int, height: int) -> str:
    """A data URL whose PNG header claims ``width`` x ``height`` (no pixel data): what a client
    sends to make the server decode a 1.2 GB image, without this test allocating one."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _post_chat(server: BackgroundServer, payload: dict[str, Any] | bytes, **kwargs: Any) -> httpx.Response:
    if isinstance(payload, bytes):
        return httpx.post(f"{server.url}/v1/chat/completions", content=payload,
                          headers={"content-type": "application/json", **kwargs.pop("headers", {})}, timeout=120,
                          **kwargs)
    return httpx.post(f"{server.url}/v1/chat/completions", json=payload, timeout=120, **kwargs)


def test_a_request_with_raw_image_pad_tokens_fails_alone(server: BackgroundServer) -> None:
    # one such request used to fail 10-11 of the 12 well-formed requests batched with it
    bad = {"messages": [{"role": "user", "content": "look <|image_pad|><|image_pad|> here"}], "max_tokens": 2}
    colours = ["red", "green", "blue", "white", "black", "yellow", "purple", "orange", "gray", "pink", "brown"]
    payloads = [_image_request(colour, max_tokens=2) for colour in colours]
    payloads.insert(5, bad)
    with concurrent.futures.ThreadPoolExecutor(len(payloads)) as pool:
        responses = list(pool.map(lambda payload: _post_chat(server, payload), payloads))
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * 5 + [400] + [200] * 6, [r.text[:200] for r in responses]
    assert "<|image_pad|>" in responses[5].json()["error"]["message"]


@pytest.mark.parametrize(("payload", "fragment"), [
    ({"messages": [{"role": "user", "content": "hi"}], "seed": 2**70}, "seed"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": _png_header_only(20000, 20000)}}]}]},
     "image too large"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": _png_header_only(5000, 5000)}}]}]},
     "5000x5000"),
    ({"messages": [{"role": "user", "content": "word " * 5000}], "max_tokens": 4}, "maximum context length is 4096"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4090}, "maximum context length is 4096"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100_000}, "limit of 4096"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 1000}, "n=1000"),
    (b"[" * 100_000, "not valid JSON"),
    (b'{"messages": ' + b"[" * 200 + b"]" * 200 + b"}", "nests deeper"),
    (b"[1, 2]", "JSON object"),
])
def test_hostile_requests_get_400_with_a_message(server: BackgroundServer, payload: dict[str, Any] | bytes,
                                                 fragment: str) -> None:
    started = time.monotonic()
    response = _post_chat(server, payload)
    assert response.status_code == 400, response.text[:300]
    assert fragment in response.json()["error"]["message"]
    assert time.monotonic() - started < 30  # refused up front, never queued for generation
    assert _post_chat(server, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).status_code == 200


class _PoisonBackend(ModelBackend):
    """A fake backend (named as such) whose batched generate fails whenever one chat says "poison":
    a failure validation cannot foresee.  The server must retry the batch one by one."""

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        if any("poison" in message.content for chat in chats for message in chat):
            raise RuntimeError("poisoned batch")
        return [[Generation(text="ok")] for _ in chats]


def test_a_failing_batch_is_retried_one_by_one() -> None:
    with BackgroundServer(create_app(_PoisonBackend(), "p", batch_window_ms=200.0)) as running:
        texts = ["a", "b", "poison", "c", "d"]
        with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
            responses = list(pool.map(lambda text: _post_chat(running, {"messages": [{"role": "user", "content": text}]}),
                                      texts))
        assert [r.status_code for r in responses] == [200, 200, 500, 200, 200]
        assert "poisoned batch" in responses[2].json()["error"]["message"]


def test_token_auth_guards_everything_but_health(backend: TransformersBackend) -> None:
    with BackgroundServer(create_app(backend, "tiny", token="s3cret")) as running:
        request = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        refused = _post_chat(running, request)
        assert refused.status_code == 401 and "bearer token" in refused.json()["error"]["message"]
        assert _post_chat(running, request, headers={"authorization": "Bearer nope"}).status_code == 401
        for path in ("/docs", "/openapi.json", "/v1/models", "/stats"):
            assert httpx.get(running.url + path, timeout=10).status_code == 401, path
        assert httpx.get(running.url + "/health", timeout=10).status_code == 200
        assert _post_chat(running, request, headers={"authorization": "Bearer s3cret"}).status_code == 200


# ------------------------------------------------- issue 22 item 8: bounded bodies, images, fields

@pytest.fixture(scope="module")
def tight_server(backend: TransformersBackend) -> Iterator[BackgroundServer]:
    """Small limits, so each failure reproduces with small inputs."""
    limits = ServeLimits(max_body_bytes=256 * 1024, max_json_values=10_000, max_image_pixels=64 * 64,
                         max_request_pixels=2 * 64 * 64, max_stop_strings=4, max_stop_chars=32)
    with BackgroundServer(create_app(backend, "tiny", batch_window_ms=5.0, limits=limits)) as running:
        yield running


def _image_part(size: int, fmt: str = "PNG") -> dict[str, Any]:
    import base64
    import io

    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "white").save(buffer, format=fmt)
    url = f"data:image/{fmt.lower()};base64," + base64.b64encode(buffer.getvalue()).decode()
    return {"type": "image_url", "image_url": {"url": url}}


def test_an_oversized_body_is_413_and_health_still_answers(tight_server: BackgroundServer) -> None:
    declared = _post_chat(tight_server, b" " * (300 * 1024))
    assert declared.status_code == 413 and "exceeds the limit" in declared.json()["error"]["message"]
    streamed = httpx.post(f"{tight_server.url}/v1/chat/completions", content=iter([b" " * 65536] * 6),
                          headers={"content-type": "application/json"}, timeout=60)
    assert streamed.status_code == 413
    many_values = _post_chat(tight_server, b"[" + b"0," * 50_000 + b"0]")  # 100 KB, 50,001 values
    assert many_values.status_code == 413 and "JSON values" in many_values.json()["error"]["message"]
    assert httpx.get(f"{tight_server.url}/health", timeout=10).json() == {"status": "ok"}


@pytest.mark.parametrize(("payload", "fragment"), [
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": Infinity}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": 1e308}, "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": -0.5}, "top_p"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": -Infinity}', "presence_penalty"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 10**6}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": ["x"] * 5}, "stop: 5 stop strings"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": ["y" * 33]}, "stop[0]"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": [""]}, "must not be empty"),
    ({"messages": [{"role": "user", "content": [_image_part(65)]}]}, "65x65"),
    ({"messages": [{"role": "user", "content": [_image_part(64)] * 3}]}, "pixels together"),
    ({"messages": [{"role": "user", "content": [_image_part(8, "TIFF")]}]}, "accepted formats"),
])
def test_fields_and_images_past_the_limits_are_400s_naming_them(tight_server: BackgroundServer,
                                                                payload: dict[str, Any] | bytes, fragment: str) -> None:
    response = _post_chat(tight_server, payload)
    assert response.status_code == 400, response.text[:300]
    assert fragment in response.json()["error"]["message"]


def test_requests_within_the_limits_still_work(tight_server: BackgroundServer) -> None:
    request = {"messages": [{"role": "user", "content": [_image_part(64), _image_part(64)]}],
               "stop": ["x", "yy"], "max_tokens": 2, "temperature": 0.0}
    response = _post_chat(tight_server, request)
    assert response.status_code == 200, response.text[:300]


def test_a_text_far_past_the_context_is_refused_before_tokenizing(tight_server: BackgroundServer) -> None:
    response = _post_chat(tight_server, {"messages": [{"role": "user", "content": "a" * 200_000}]})
    assert response.status_code == 400 and "200,000 characters" in response.json()["error"]["message"]

"""``vista serve`` stops work for clients that have gone (issue 33 item 3), over real HTTP on
127.0.0.1 with the tiny random Qwen2.5-VL: streams send tokens while they are generated, a
disconnect cancels queued and running generations (streamed or not), and a full queue answers 503
with ``Retry-After``.  Each test runs its own server over a backend that records when its generate
calls start and end."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.server import BackgroundServer, ServeLimits, create_app

from vista_rl import Chat, Generation, SamplingParams

CHAT = "/v1/chat/completions"


class _WatchedBackend(TransformersBackend):
    """The real tiny backend (the session's model and processor), recording when each generate
    call starts and ends and what it returned."""

    def __init__(self, source: TransformersBackend) -> None:
        super().__init__(model=source.model, processor=source.processor, device="cpu")
        self.started = threading.Event()
        self.ended = threading.Event()
        self.results: list[list[list[Generation]]] = []

    def generate(self, chats: Sequence[Chat], params: SamplingParams, *, top_logprobs: int = 0,
                 control: Any = None) -> list[list[Generation]]:
        self.started.set()
        extra = {"control": control} if control is not None else {}
        try:
            outputs = super().generate(chats, params, top_logprobs=top_logprobs, **extra)
        finally:
            self.ended.set()
        self.results.append(outputs)
        return outputs


def _body(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.0, **fields}


def _open_post(server: BackgroundServer, body: dict[str, Any]) -> socket.socket:
    """A request sent on a raw socket the test closes when it wants the client gone."""
    raw = json.dumps(body).encode()
    sock = socket.create_connection((server.host, server.port))
    sock.sendall(f"POST {CHAT} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(raw)}\r\n\r\n".encode() + raw)
    return sock


def _stats(server: BackgroundServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.url}/stats", timeout=30).json())


def _until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_stream_sends_tokens_while_generating_and_stops_when_its_client_goes(backend: TransformersBackend) -> None:
    watched = _WatchedBackend(backend)
    with BackgroundServer(create_app(watched, "tiny", batch_window_ms=5.0)) as server:
        with httpx.Client(timeout=120) as http, \
                http.stream("POST", server.url + CHAT, json=_body(max_tokens=2048, stream=True)) as response:
            for line in response.iter_lines():
                chunk = json.loads(line[len("data: "):]) if line.startswith("data: {") else {}
                if any(choice.get("delta", {}).get("content") for choice in chunk.get("choices", [])):
                    break
            # the old server sent the first token only after all 2048 were generated
            assert not watched.ended.is_set(), "the first token came after the generation finished"
        assert watched.ended.wait(60)  # closing the stream stopped the generation
        stats = _stats(server)
    assert stats["cancelled_running"] == 1
    assert len(watched.results[-1][0][0].token_ids) < 2048


def test_a_plain_request_whose_client_disconnects_is_cancelled_queued_or_running(
        backend: TransformersBackend) -> None:
    watched = _WatchedBackend(backend)
    with BackgroundServer(create_app(watched, "tiny", batch_window_ms=5.0)) as server:
        running = _open_post(server, _body(max_tokens=2048, n=4))
        assert watched.started.wait(60)
        queued = _open_post(server, _body(max_tokens=2048, temperature=0.5))  # other params: waits its turn
        _until(lambda: _stats(server).get("queued_rows") == 1)
        queued.close()
        _until(lambda: _stats(server)["cancelled_queued"] == 1)
        running.close()
        assert watched.ended.wait(60)
        _until(lambda: _stats(server)["cancelled_running"] == 1)
        assert httpx.post(server.url + CHAT, json=_body(max_tokens=2), timeout=60).status_code == 200
    assert len(watched.results) == 2  # the cancelled queued request never ran; the last one did
    assert all(len(generation.token_ids) < 2048 for generation in watched.results[0][0])


def test_a_full_queue_answers_503_with_retry_after(backend: TransformersBackend) -> None:
    watched = _WatchedBackend(backend)
    limits = ServeLimits(max_queued_rows=2, retry_after_s=7)
    with BackgroundServer(create_app(watched, "tiny", batch_window_ms=5.0, limits=limits)) as server, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = _open_post(server, _body(max_tokens=2048))
        assert watched.started.wait(60)
        waiting = pool.submit(httpx.post, server.url + CHAT, json=_body(max_tokens=3, n=2, temperature=0.5),
                              timeout=120)
        _until(lambda: _stats(server).get("queued_rows") == 2)
        refused = httpx.post(server.url + CHAT, json=_body(max_tokens=3), timeout=60)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "7"
        assert "--max-queued-rows" in refused.json()["error"]["message"]
        busy.close()  # its generation is cancelled, so the waiting request runs next
        assert waiting.result().status_code == 200
        assert httpx.post(server.url + CHAT, json=_body(max_tokens=3), timeout=60).status_code == 200
        assert _stats(server)["rejected_queue_full"] == 1


def test_a_request_after_six_abandoned_streams_is_served_about_as_fast_as_when_quiet(
        backend: TransformersBackend) -> None:
    """Issue 33's finding: 6 streamed ``n=16, max_tokens=512`` requests whose sockets close at once
    made the next 8-token request wait for all their tokens (60.8 s instead of 1.4 s there, 15 s
    against 0.09 s on a loaded 2-core machine here).  The bound is 2x the quiet latency measured
    here plus 2 s of slack for a loaded machine, far below what the abandoned work costs."""
    watched = _WatchedBackend(backend)
    probe = _body(max_tokens=8)
    with BackgroundServer(create_app(watched, "tiny", batch_window_ms=10.0)) as server, \
            httpx.Client(base_url=server.url, timeout=300) as http:

        def latency() -> float:
            started = time.perf_counter()
            assert http.post(CHAT, json=probe).status_code == 200
            return time.perf_counter() - started

        latency()
        quiet = statistics.median(latency() for _ in range(3))
        watched.started.clear()
        streams = [_open_post(server, _body(max_tokens=512, n=16, temperature=1.0, stream=True)) for _ in range(6)]
        assert watched.started.wait(60)  # the abandoned work is being generated
        for sock in streams:
            sock.close()
        after = latency()
        stats = _stats(server)
    assert after < 2 * quiet + 2.0, f"{after:.2f} s after the abandoned streams, {quiet:.2f} s when quiet"
    assert stats["cancelled_queued"] + stats["cancelled_running"] == 6, stats


@pytest.mark.parametrize("route", [CHAT, "/v1/completions"])
def test_a_live_stream_assembles_to_the_non_streamed_text_with_stop_strings(backend: TransformersBackend,
                                                                            route: str) -> None:
    """Batched rows, ``n`` > 1, stop strings hit in some rows (their text must never be sent) and,
    on ``/v1/completions``, two prompts whose choices interleave."""
    sampling = {"max_tokens": 40, "n": 4, "temperature": 1.0, "seed": 5, "stop": [" number", "er"]}
    request = _body(**sampling) if route == CHAT else {"prompt": ["hello", "Once upon a time"], **sampling}
    with BackgroundServer(create_app(backend, "tiny", batch_window_ms=5.0)) as server, \
            httpx.Client(base_url=server.url, timeout=120) as http:
        whole = http.post(route, json=request).json()
        texts: dict[int, str] = {}
        finish: dict[int, str] = {}
        chunks = 0
        with http.stream("POST", route, json={**request, "stream": True}) as response:
            for line in response.iter_lines():
                if not line.startswith("data: {"):
                    continue
                chunks += 1
                for choice in json.loads(line[len("data: "):])["choices"]:
                    piece = choice["delta"].get("content", "") if route == CHAT else choice["text"]
                    texts[choice["index"]] = texts.get(choice["index"], "") + piece
                    if choice["finish_reason"]:
                        finish[choice["index"]] = choice["finish_reason"]
    expected = {choice["index"]: choice["message"]["content"] if route == CHAT else choice["text"]
                for choice in whole["choices"]}
    assert texts == expected and len(expected) == (4 if route == CHAT else 8)
    assert finish == {choice["index"]: choice["finish_reason"] for choice in whole["choices"]}
    assert sorted(set(finish.values())) == ["length", "stop"]  # the stop strings were hit, and not sent
    assert chunks > 4

"""The openai backend over real HTTP on 127.0.0.1: against ``vista serve`` (started here as a
subprocess through the real CLI), and against deliberately failing servers."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from vista_plugin_openai.backend import OpenAIBackend, chat_to_openai_messages

import vista_rl
from vista_rl import Message, SamplingParams

fastapi = pytest.importorskip("fastapi")
server_module = pytest.importorskip("vista_plugin_transformers.server")
BackgroundServer = server_module.BackgroundServer
free_port = server_module.free_port
wait_for_health = server_module.wait_for_health

GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
FAST_RETRY = {"backoff_s": 0.01, "max_backoff_s": 0.05}


def _chat(index: int) -> list[Message]:
    image = Image.new("RGB", (112, 112), (30 * index % 256, 120, 60))
    return [Message("system", "Answer with a direction."), Message("user", f"Step {index}: <image> Move?", [image])]


@pytest.fixture(scope="module")
def vista_serve(tiny_model_dir: Path) -> Iterator[str]:
    """``vista serve`` on a free port, as a user would start it."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log_path = tiny_model_dir.parent / f"vista-serve-{port}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "from vista_rl.cli import main; main()", "serve", str(tiny_model_dir),
             "--port", str(port), "--model-name", "tiny", "--batch-window-ms", "50"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, process, timeout_s=120, log_path=log_path)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_messages_carry_images_as_data_urls() -> None:
    messages = chat_to_openai_messages(_chat(1))
    assert messages[0] == {"role": "system", "content": "Answer with a direction."}
    parts = messages[1]["content"]
    assert [part["type"] for part in parts] == ["text", "image_url", "text"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_against_vista_serve_matches_the_transformers_backend(vista_serve: str, tiny_model_dir: Path) -> None:
    backend = vista_rl.make_model("openai", path=f"{vista_serve}/v1")
    assert isinstance(backend, OpenAIBackend)
    assert backend.model == "tiny"  # discovered from /v1/models
    remote = backend.generate([_chat(0), _chat(1)], GREEDY)
    local = vista_rl.make_model("transformers", path=str(tiny_model_dir), device="cpu").generate([_chat(0), _chat(1)], GREEDY)
    for got, want in zip(remote, local, strict=True):
        assert got[0].text == want[0].text
        assert got[0].token_ids == want[0].token_ids
        assert got[0].prompt_token_ids == want[0].prompt_token_ids
        assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-4)
        assert got[0].finish_reason == "length"
    backend.close()


def test_concurrent_chats_are_batched_by_the_server(vista_serve: str) -> None:
    backend = OpenAIBackend(base_url=vista_serve, model="tiny", max_concurrency=8)
    before = httpx.get(f"{vista_serve}/stats").json()
    outputs = backend.generate([_chat(i) for i in range(8)], SamplingParams(temperature=1.0, max_tokens=4, n=2, seed=1))
    after = httpx.get(f"{vista_serve}/stats").json()
    assert [len(samples) for samples in outputs] == [2] * 8
    assert all(g.finish_reason != "error" and len(g.token_ids) == 4 for s in outputs for g in s)
    assert after["requests"] - before["requests"] == 8
    assert after["generate_calls"] - before["generate_calls"] < 8


class _Flaky:
    """A FastAPI server (a deliberately failing one, not a stand-in for a model) that answers 500 to
    the first ``failures`` requests (or to every request mentioning ``poison``), then a fixed
    completion."""

    def __init__(self, failures: int = 0, status: int = 500, delay_s: float = 0.0) -> None:
        self.failures, self.status, self.delay_s = failures, status, delay_s
        self.attempts = 0
        self.app = fastapi.FastAPI()
        self.app.get("/v1/models")(lambda: {"data": [{"id": "flaky"}]})
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, body: dict[str, Any]) -> Any:
        self.attempts += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.attempts <= self.failures or "poison" in str(body["messages"]):
            return fastapi.responses.JSONResponse(status_code=self.status,
                                                  content={"error": {"message": "engine crashed (deliberate)"}})
        choice = {"message": {"role": "assistant", "content": "<answer>Up</answer>"}, "finish_reason": "stop",
                  "token_ids": [5, 6],
                  "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.0}]}}
        return {"choices": [{"index": i, **choice} for i in range(body.get("n", 1))], "prompt_token_ids": [1, 2, 3]}


def test_5xx_is_retried_until_it_succeeds() -> None:
    flaky = _Flaky(failures=2)
    with BackgroundServer(flaky.app) as server:
        output = OpenAIBackend(server.url, max_retries=3, **FAST_RETRY).generate([_chat(0)], GREEDY)[0][0]
    assert flaky.attempts == 3
    assert output.text == "<answer>Up</answer>" and output.token_ids == [5, 6]
    assert output.logprobs == [-0.5, -1.0] and output.prompt_token_ids == [1, 2, 3]


def test_a_failing_request_becomes_an_error_generation_without_crashing_the_batch() -> None:
    flaky = _Flaky()
    chats = [_chat(0), [Message("user", "poison")], _chat(2)]
    with BackgroundServer(flaky.app) as server:
        outputs = OpenAIBackend(server.url, max_retries=2, **FAST_RETRY).generate(
            chats, SamplingParams(temperature=0.0, max_tokens=4, n=2))
    assert [g.finish_reason for g in outputs[0]] == ["stop", "stop"]
    assert [g.finish_reason for g in outputs[1]] == ["error", "error"]
    error = outputs[1][0].metadata
    assert error["status"] == 500 and error["attempts"] == 3
    assert "HTTP 500" in error["error"] and "engine crashed (deliberate)" in error["error"]
    assert outputs[2][0].text == "<answer>Up</answer>"
    assert flaky.attempts == 2 + 3


def test_client_errors_are_not_retried() -> None:
    flaky = _Flaky(failures=10, status=400)
    with BackgroundServer(flaky.app) as server:
        output = OpenAIBackend(server.url, max_retries=3, **FAST_RETRY).generate([_chat(0)], GREEDY)[0][0]
    assert output.finish_reason == "error" and "rejected" in output.metadata["error"]
    assert flaky.attempts == 1


def test_timeouts_are_retried_then_reported() -> None:
    slow = _Flaky(delay_s=1.0)
    with BackgroundServer(slow.app) as server:
        output = OpenAIBackend(server.url, timeout_s=0.2, max_retries=1, **FAST_RETRY).generate([_chat(0)], GREEDY)[0][0]
    assert output.finish_reason == "error" and "ReadTimeout" in output.metadata["error"]
    assert slow.attempts == 2


@pytest.fixture
def dropping_server() -> Iterator[tuple[str, list[int]]]:
    """A TCP server that accepts each connection and closes it without answering."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            accepted.append(1)
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_dropped_connections_are_retried_then_reported(dropping_server: tuple[str, list[int]]) -> None:
    url, accepted = dropping_server
    backend = OpenAIBackend(url, model="any", max_retries=2, **FAST_RETRY)
    outputs = backend.generate([_chat(0), _chat(1)], GREEDY)
    for samples in outputs:
        assert samples[0].finish_reason == "error"
        assert "failed after 3 attempts" in samples[0].metadata["error"]
        assert samples[0].metadata["status"] is None
    assert len(accepted) == 6


def test_unreachable_server_is_reported_for_every_chat() -> None:
    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}", max_retries=1, **FAST_RETRY)
    outputs = backend.generate([_chat(0), _chat(1)], SamplingParams(max_tokens=4, n=3))
    assert [[g.finish_reason for g in samples] for samples in outputs] == [["error"] * 3] * 2
    assert "ConnectError" in outputs[0][0].metadata["error"]


def test_missing_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="base URL"):
        OpenAIBackend()


def test_a_wrong_number_of_choices_is_reported_as_malformed() -> None:
    class _OneChoice(_Flaky):
        async def complete(self, body: dict[str, Any]) -> Any:
            return await super().complete({**body, "n": 1})

    with BackgroundServer(_OneChoice().app) as server:
        output = OpenAIBackend(server.url, **FAST_RETRY).generate([_chat(0)], SamplingParams(n=2))[0]
    assert [g.finish_reason for g in output] == ["error", "error"]
    assert "malformed response" in output[0].metadata["error"] and "n=2" in output[0].metadata["error"]

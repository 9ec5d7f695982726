"""``vista serve``: an OpenAI-compatible chat-completions server over any vista model backend.

Concurrent requests are batched: the first waiting request opens a short window
(``batch_window_ms``); every request with the same sampling parameters that arrives inside it joins
one ``generate`` call.  Rollout workers that each send one chat at a time therefore still get
batched generation.  Extras understood on top of OpenAI's fields, as in vLLM: ``return_token_ids``
(adds ``prompt_token_ids`` to the response and ``token_ids`` to each choice).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista_plugin_transformers.openai_messages import MessageFormatError, openai_messages_to_chat
from vista_rl import Chat, Generation, ModelBackend, SamplingParams


class ChatCompletionRequest(BaseModel):
    """The subset of OpenAI's request this server honours; unknown fields are ignored."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]]
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    stream: bool = False
    return_token_ids: bool = False

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, n=self.n, stop=stop, seed=self.seed,
            max_tokens=self.max_completion_tokens or self.max_tokens or default_max_tokens,
        )


@dataclass
class _Pending:
    chat: Chat
    params: SamplingParams
    future: asyncio.Future[list[Generation]]


@dataclass
class BatchStats:
    """Counters exposed at ``GET /stats`` (how well requests are being batched)."""

    requests: int = 0
    generate_calls: int = 0
    largest_batch: int = 0
    batch_sizes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "generate_calls": self.generate_calls,
                "largest_batch": self.largest_batch, "recent_batch_sizes": self.batch_sizes[-32:]}


class RequestBatcher:
    """Collects requests arriving within ``window_s`` of each other into one ``generate`` call per
    distinct set of sampling parameters.  Generation runs on one worker thread, so the event loop
    keeps accepting requests (and filling the next batch) while a batch is being generated."""

    def __init__(self, backend: ModelBackend, window_s: float = 0.005, max_batch_size: int = 64) -> None:
        self.backend = backend
        self.window_s = window_s
        self.max_batch_size = max_batch_size
        self.stats = BatchStats()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vista-generate")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, chat: Chat, params: SamplingParams) -> list[Generation]:
        if self._queue is None:
            raise RuntimeError("batcher not started")
        future: asyncio.Future[list[Generation]] = asyncio.get_running_loop().create_future()
        self.stats.requests += 1
        await self._queue.put(_Pending(chat, params, future))
        return await future

    async def _collect(self) -> list[_Pending]:
        assert self._queue is not None
        batch = [await self._queue.get()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.window_s
        while len(batch) < self.max_batch_size:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except asyncio.TimeoutError:
                break
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            groups: dict[str, list[_Pending]] = {}
            for pending in batch:
                groups.setdefault(pending.params.model_dump_json(), []).append(pending)
            for members in groups.values():
                params = members[0].params
                self.stats.generate_calls += 1
                self.stats.largest_batch = max(self.stats.largest_batch, len(members))
                self.stats.batch_sizes.append(len(members))
                try:
                    outputs = await loop.run_in_executor(
                        self._executor, self.backend.generate, [m.chat for m in members], params
                    )
                except Exception as exc:  # noqa: BLE001 - every waiting request gets the error
                    for member in members:
                        if not member.future.done():
                            member.future.set_exception(exc)
                    continue
                for member, generations in zip(members, outputs, strict=True):
                    if not member.future.done():
                        member.future.set_result(generations)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})


def _token_text(tokenizer: Any, token_id: int) -> str:
    return str(tokenizer.decode([token_id])) if tokenizer is not None else str(token_id)


def _choice(index: int, generation: Generation, want_logprobs: bool, want_ids: bool,
            tokenizer: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": index,
        "message": {"role": "assistant", "content": generation.text},
        "finish_reason": generation.finish_reason,
        "logprobs": None,
    }
    if want_logprobs and generation.logprobs is not None:
        content = []
        for token_id, logprob in zip(generation.token_ids, generation.logprobs, strict=False):
            token = _token_text(tokenizer, token_id)
            content.append({"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")),
                            "top_logprobs": []})
        choice["logprobs"] = {"content": content}
    if want_ids:
        choice["token_ids"] = list(generation.token_ids)
    return choice


def create_app(backend: ModelBackend, model_name: str, *, batch_window_ms: float = 20.0,
               max_batch_size: int = 64, default_max_tokens: int = 256) -> FastAPI:
    """The FastAPI app: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
    ``GET /stats`` (batching counters)."""
    batcher = RequestBatcher(backend, window_s=batch_window_ms / 1000.0, max_batch_size=max_batch_size)
    tokenizer = getattr(backend, "tokenizer", None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="vista serve", lifespan=lifespan)
    app.state.batcher = batcher

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return batcher.stats.to_dict()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list",
                "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "vista"}]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: dict[str, Any]) -> JSONResponse | dict[str, Any]:
        try:
            request = ChatCompletionRequest.model_validate(body)
            params = request.sampling_params(default_max_tokens)
            chat = openai_messages_to_chat(request.messages)
        except (ValidationError, MessageFormatError, ValueError) as exc:
            return _error(400, str(exc))
        if request.stream:
            return _error(400, "stream=true is not supported by vista serve")
        if request.model not in (None, model_name):
            return _error(404, f"model {request.model!r} is not served here; this server has {model_name!r}",
                          "not_found_error")
        try:
            generations = await batcher.submit(chat, params)
        except Exception as exc:  # noqa: BLE001 - reported to the client as a server error
            return _error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
        prompt_ids = generations[0].prompt_token_ids or []
        completion_tokens = sum(len(g.token_ids) for g in generations)
        response: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [_choice(i, g, request.logprobs, request.return_token_ids, tokenizer)
                        for i, g in enumerate(generations)],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt_ids) + completion_tokens},
        }
        if request.return_token_ids:
            response["prompt_token_ids"] = list(prompt_ids)
        return response

    return app


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (for tests and ad-hoc servers)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class BackgroundServer:
    """Runs an ASGI app with uvicorn on a daemon thread (real HTTP on ``host``), for tests and
    notebooks: ``with BackgroundServer(app) as server: httpx.get(server.url + "/health")``."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None,
                 startup_timeout_s: float = 30.0) -> None:
        import uvicorn

        self.host = host
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.startup_timeout_s = startup_timeout_s
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=self.port, log_level="warning"))
        self._thread: Any = None

    def __enter__(self) -> BackgroundServer:
        import threading

        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def wait_for_health(url: str, process: Any = None, timeout_s: float = 120.0, log_path: Any = None) -> None:
    """Poll ``url/health`` until it answers 200.  Raises with the tail of ``log_path`` when the
    server ``process`` (a ``subprocess.Popen``) exits first or ``timeout_s`` passes."""
    import pathlib

    import httpx

    def tail() -> str:
        if log_path is None or not pathlib.Path(log_path).exists():
            return ""
        return "\n" + pathlib.Path(log_path).read_text(errors="replace")[-3000:]

    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server for {url} exited with code {process.returncode}{tail()}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}/health did not answer 200 within {timeout_s:.0f} s{tail()}")
        time.sleep(0.2)

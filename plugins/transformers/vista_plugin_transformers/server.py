"""``vista serve``: an OpenAI-compatible server over any vista model backend: chat completions
(streamed as server-sent events on request, with ``top_logprobs``) and, for backends with
``generate_text``, the legacy ``/v1/completions`` for text prompts.  On a backend that takes
``control`` (the transformers one), a stream sends tokens as they are sampled
(:mod:`vista_plugin_transformers.live_stream`); a stream asking for logprobs or token ids, or on
another backend, replays the finished generation token by token
(:mod:`vista_plugin_transformers.openai_responses`).

Concurrent requests are batched: the first waiting request opens a short window
(``batch_window_ms``); every request with the same sampling parameters that arrives inside it joins
one ``generate`` call.  Rollout workers that each send one chat at a time therefore still get
batched generation.  The queue is bounded (``max_queued_rows``: past it a 503 with
``Retry-After``), and a request whose client disconnects is cancelled, queued or running
(:mod:`vista_plugin_transformers.request_queue`).  Extras understood on top of OpenAI's fields, as in vLLM: ``return_token_ids``
(adds ``prompt_token_ids`` to the response and ``token_ids`` to each choice).

Every request is validated on its own before it may join a batch, as vLLM's and TGI's servers do,
so a bad request fails alone with a 400 and never takes the batch with it: the body (bytes, counted
while it streams in; how many JSON values it can hold, bounded from its bytes before parsing;
nesting), the fields (numbers finite and in range, ``seed`` within 64 bits, ``max_tokens`` under the
cap, ``n``, the number and length of ``stop`` strings), the images (size read from the header
before decoding, pixels per image and per request; see :mod:`vista_rl.limits`) and, through the
backend's ``check_prompt(chat)`` when it has one, the encoded prompt (no raw special tokens; prompt
plus ``max_tokens`` within the context length).  JSON parsing and validation run on worker threads,
never on the event loop or the generate thread, so ``/health`` answers while a large body is parsed.
After a large request the server collects garbage and trims the heap (:func:`vista_rl.limits.release_memory`).
Should a batched ``generate`` still fail, its requests are retried one by one, so only the culprit
gets the error.  With a token set, every route but ``/health`` needs ``Authorization: Bearer``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask, BackgroundTasks

from vista_plugin_transformers.live_stream import LiveStream
from vista_plugin_transformers.openai_messages import openai_messages_to_chat
from vista_plugin_transformers.openai_requests import ChatCompletionRequest, CompletionRequest
from vista_plugin_transformers.openai_responses import (
    StreamHeader,
    TokenTexts,
    chat_choice,
    completion_choice,
    request_usage,
    stream_events,
)
from vista_plugin_transformers.request_queue import QueueFull, RequestBatcher, results_unless_gone
from vista_rl import Chat, ModelBackend, SamplingParams
from vista_rl.limits import (
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_IMAGES,
    DEFAULT_MAX_REQUEST_PIXELS,
    json_values_bound,
    release_memory,
)
from vista_rl.serving import BearerAuth, BodyTooLarge, nesting_depth, read_limited_body

MAX_JSON_DEPTH = 32
RequestT = TypeVar("RequestT", ChatCompletionRequest, CompletionRequest)
ParsedT = TypeVar("ParsedT")
LARGE_REQUEST_BYTES = 1024 * 1024
#: a text this many times the context length in characters cannot fit it (tokens average 3-5
#: characters; only runs of one repeated character reach 32), so it is refused before tokenizing:
#: tokenizing 60 MB of text took gigabytes
MAX_CHARS_PER_TOKEN = 32


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})


def _after(large: bool) -> BackgroundTask | None:
    """Once the response is sent (the request's objects dropped), give a large request's memory back."""
    return BackgroundTask(release_memory) if large else None


def _failed(exc: Exception, large: bool) -> JSONResponse:
    response = _error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
    response.background = _after(large)
    return response


def _busy(exc: QueueFull, large: bool) -> JSONResponse:
    """503 with ``Retry-After`` (the official OpenAI client waits that long and retries)."""
    response = _error(503, str(exc), "server_overloaded")
    response.headers["retry-after"] = str(exc.retry_after_s)
    response.background = _after(large)
    return response


@dataclass
class _Responder:
    """Queues a validated request and answers it: a live stream, a replayed stream or one JSON
    body; a 503 when the queue is full; nothing useful (the client is gone) after a disconnect."""

    batcher: RequestBatcher
    texts: TokenTexts
    model_name: str
    workers: ThreadPoolExecutor  # builds replayed streams off the event loop

    async def answer(self, http_request: Request, request: Any, params: SamplingParams,
                     prompts: Sequence[Chat | str], kind: str, large: bool) -> JSONResponse | StreamingResponse:
        chat = kind == "chat"
        header = StreamHeader(f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                              "chat.completion.chunk" if chat else "text_completion", int(time.time()),
                              self.model_name, request.include_usage)
        logprobs = request.logprobs is not None and request.logprobs is not False
        live = None
        if (request.stream and self.batcher.controls[kind] and not logprobs and not request.return_token_ids
                and self.texts.tokenizer is not None):
            live = LiveStream(header, self.texts.tokenizer, params.n, len(prompts), params.stop)
        try:
            ticket = self.batcher.enqueue(prompts, params, kind=kind, top_logprobs=request.top_logprobs_wanted,
                                          sink=live)
        except QueueFull as exc:
            return _busy(exc, large)
        if live is not None:
            async def drop() -> None:  # on the event loop (a sync task would run on a worker thread)
                self.batcher.cancel(ticket)
                ticket.members.clear()  # the prompts (images) go before the memory release below

            # the background runs after the stream ends, even when a disconnect cancelled it before
            # its generator started (so the generator's own ``finally`` never ran)
            cleanup = BackgroundTasks([BackgroundTask(drop), *filter(None, [_after(large)])])
            return StreamingResponse(live.events(ticket, self.batcher.cancel), media_type="text/event-stream",
                                     background=cleanup, headers={"cache-control": "no-cache"})
        try:
            per_prompt = await results_unless_gone(self.batcher, ticket, http_request.receive)
        except Exception as exc:  # noqa: BLE001 - reported to the client as a server error
            return _failed(exc, large)
        if per_prompt is None:  # nobody reads this answer
            gone = _error(499, "the client closed the connection; its generation was cancelled", "client_closed")
            gone.background = _after(large)
            return gone
        # choice index = prompt index * n + sample index, as OpenAI orders them
        choices = [(generation, 0 if chat else len(prompt))
                   for prompt, generations in zip(prompts, per_prompt, strict=True) for generation in generations]
        prompt_ids = [list(generations[0].prompt_token_ids or []) for generations in per_prompt]
        extra = {"prompt_token_ids": prompt_ids[0] if chat else prompt_ids} if request.return_token_ids else {}
        if request.stream:
            events = await asyncio.get_running_loop().run_in_executor(self.workers, lambda: list(stream_events(
                header, choices, self.texts, logprobs=logprobs, token_ids=request.return_token_ids,
                total_usage=request_usage(per_prompt), first_extra=extra)))
            return StreamingResponse(iter(events), media_type="text/event-stream", background=_after(large),
                                     headers={"cache-control": "no-cache"})
        if chat:
            body = [chat_choice(index, generation, self.texts, logprobs=request.logprobs,
                                token_ids=request.return_token_ids) for index, (generation, _) in enumerate(choices)]
        else:
            body = [completion_choice(index, generation, self.texts, logprobs=logprobs, prompt_chars=prompt_chars,
                                      token_ids=request.return_token_ids)
                    for index, (generation, prompt_chars) in enumerate(choices)]
        response = {"id": header.id, "object": "chat.completion" if chat else "text_completion",
                    "created": header.created, "model": self.model_name, "choices": body,
                    "usage": request_usage(per_prompt), **extra}
        return JSONResponse(response, background=_after(large))


class RequestRejected(Exception):
    """A request failed validation; ``status`` and ``message`` are what the client gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.large = False


@dataclass
class ServeLimits:
    """What one request may ask of ``vista serve`` (all configurable from the CLI).

    ``max_model_len``: context length (prompt + max_tokens); None takes the backend's.
    ``max_tokens_limit``: the largest ``max_tokens`` a request may ask for.
    ``max_json_values``: a bound (from the bytes, see :func:`vista_rl.limits.json_values_bound`)
    on the values one body may hold: 60 MB of tiny values parse into gigabytes of objects.
    ``max_stop_strings`` / ``max_stop_chars``: each stop string costs the generate thread work per
    vocabulary entry (300 strings of 300 characters took 7.8 s and stalled every other request).
    ``max_prompts``: text prompts one ``/v1/completions`` request may list (each is a generation).
    ``max_queued_rows``: generations (prompts x ``n``) that may wait for the generate thread; past
    it a request gets 503 with ``Retry-After: retry_after_s`` (an unbounded queue let six abandoned
    ``n=16`` streams delay every later request by a minute).
    """

    max_model_len: int | None = None
    max_tokens_limit: int = 4096
    max_n: int = 16
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_images: int = DEFAULT_MAX_IMAGES
    max_body_bytes: int = 64 * 1024 * 1024
    max_json_values: int = 1_000_000
    max_stop_strings: int = 16
    max_stop_chars: int = 256
    max_prompts: int = 16
    validation_threads: int = 4
    max_queued_rows: int = 1024
    retry_after_s: int = 2


def create_app(backend: ModelBackend, model_name: str, *, batch_window_ms: float = 20.0,
               max_batch_size: int = 64, default_max_tokens: int = 256, limits: ServeLimits | None = None,
               token: str | None = None) -> FastAPI:
    """The FastAPI app: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
    ``POST /v1/completions`` (text prompts; when the backend has ``generate_text``), ``GET /stats``
    (batching counters)."""
    limits = limits or ServeLimits()
    batcher = RequestBatcher(backend, window_s=batch_window_ms / 1000.0, max_batch_size=max_batch_size,
                             max_queued_rows=limits.max_queued_rows, retry_after_s=limits.retry_after_s)
    texts = TokenTexts(getattr(backend, "tokenizer", None))
    check_prompt = getattr(backend, "check_prompt", None)
    count_text_tokens = getattr(backend, "count_text_tokens", None)
    serves_text = callable(getattr(backend, "generate_text", None))
    serves_top_logprobs = "top_logprobs" in inspect.signature(backend.generate).parameters
    max_model_len = limits.max_model_len or getattr(backend, "max_model_len", None)
    # bound once: mypy does not carry the narrowing of ``limits`` into the generic ``validated`` below
    max_tokens_limit, max_n = limits.max_tokens_limit, limits.max_n
    validator = ThreadPoolExecutor(max_workers=limits.validation_threads, thread_name_prefix="vista-validate")
    responder = _Responder(batcher, texts, model_name, validator)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()
            validator.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="vista serve", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.limits = limits
    if token:
        app.add_middleware(BearerAuth, token=token, open_paths=("/health",),  # type: ignore[arg-type]
                           error_body=lambda message: {"error": {"message": message, "type": "authentication_error"}})

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return batcher.stats.to_dict()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list",
                "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "vista",
                          "max_model_len": max_model_len}]}

    async def read_body(request: Request) -> bytes:
        """The body's bytes, refused (413) as soon as the declared or streamed size passes the limit."""
        try:
            return await read_limited_body(request.stream(), request.headers.get("content-length"),
                                           limits.max_body_bytes)
        except BodyTooLarge as exc:
            raise RequestRejected(413, str(exc)) from None

    def load_json(raw: bytes) -> dict[str, Any]:
        """Parse a body (on a worker thread: 60 MB of JSON held the event loop for 56 s)."""
        values = json_values_bound(raw)
        if values > limits.max_json_values:
            raise RequestRejected(413, f"the body may hold up to {values:,} JSON values, over this server's limit "
                                       f"of {limits.max_json_values:,}")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise RequestRejected(400, f"the body is not valid JSON: {reason}") from None
        if nesting_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
            raise RequestRejected(400, f"the body nests deeper than {MAX_JSON_DEPTH} levels")
        if not isinstance(body, dict):
            raise RequestRejected(400, "the body must be a JSON object")
        return body

    def check_stop(stop: list[str]) -> None:
        if len(stop) > limits.max_stop_strings:
            raise RequestRejected(400, f"stop: {len(stop)} stop strings exceed this server's limit of "
                                       f"{limits.max_stop_strings}")
        for index, text in enumerate(stop):
            if not text:
                raise RequestRejected(400, f"stop[{index}]: a stop string must not be empty")
            if len(text) > limits.max_stop_chars:
                raise RequestRejected(400, f"stop[{index}]: a stop string of {len(text)} characters exceeds this "
                                           f"server's limit of {limits.max_stop_chars}")

    def validated(model: type[RequestT], raw: bytes) -> tuple[RequestT, SamplingParams]:
        """The body as ``model``, with the checks every endpoint shares."""
        body = load_json(raw)
        try:
            request = model.model_validate(body)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}"
                                 for err in exc.errors()[:5])
            raise RequestRejected(400, f"invalid request: {problems}") from None
        if request.model not in (None, model_name):
            raise RequestRejected(404, f"model {request.model!r} is not served here; this server has {model_name!r}")
        problem = request.problem()
        if problem:
            raise RequestRejected(400, problem)
        if request.top_logprobs_wanted and not serves_top_logprobs:
            raise RequestRejected(400, f"this server's backend ({type(backend).__name__}) does not return top_logprobs")
        asked = request.asked_max_tokens
        if asked is not None and asked > max_tokens_limit:
            raise RequestRejected(400, f"max_tokens={asked} exceeds this server's limit of {max_tokens_limit} "
                                       "(vista serve --max-tokens-limit)")
        if request.n > max_n:
            raise RequestRejected(400, f"n={request.n} exceeds this server's limit of {max_n}")
        try:
            params = request.sampling_params(min(default_max_tokens, max_tokens_limit))
        except ValidationError as exc:
            raise RequestRejected(400, str(exc)) from None
        check_stop(list(params.stop))
        return request, params

    def check_characters(characters: int, what: str) -> None:
        """Refuse a text that cannot fit the context, before tokenizing it."""
        if max_model_len is not None and characters > max_model_len * MAX_CHARS_PER_TOKEN:
            raise RequestRejected(400, f"the {what} hold {characters:,} characters, more than this model's maximum "
                                       f"context length of {max_model_len} tokens can hold; shorten the {what}")

    def check_length(prompt_tokens: int, params: SamplingParams, what: str) -> None:
        if max_model_len is not None and prompt_tokens + params.max_tokens > max_model_len:
            raise RequestRejected(
                400, f"this model's maximum context length is {max_model_len} tokens, but {prompt_tokens + params.max_tokens} "
                     f"were requested ({prompt_tokens} in the {what}, {params.max_tokens} for the completion); "
                     f"shorten the {what} or lower max_tokens")

    def parse_chat(raw: bytes) -> tuple[ChatCompletionRequest, SamplingParams, Chat]:
        """Everything about one chat request that can be checked without the model's weights."""
        request, params = validated(ChatCompletionRequest, raw)
        try:
            chat = openai_messages_to_chat(request.messages, max_image_pixels=limits.max_image_pixels,
                                           max_images=limits.max_images, max_request_pixels=limits.max_request_pixels)
        except ValueError as exc:
            raise RequestRejected(400, str(exc)) from None
        check_characters(sum(len(message.content) for message in chat), "messages")
        prompt_tokens = 0
        if check_prompt is not None:
            try:
                prompt_tokens = int(check_prompt(chat))
            except ValueError as exc:
                raise RequestRejected(400, str(exc)) from None
        check_length(prompt_tokens, params, "messages")
        return request, params, chat

    def parse_completion(raw: bytes) -> tuple[CompletionRequest, SamplingParams]:
        request, params = validated(CompletionRequest, raw)
        if not serves_text:
            raise RequestRejected(400, f"this server's backend ({type(backend).__name__}) serves chats only; "
                                       "use /v1/chat/completions")
        prompts = request.prompts
        if len(prompts) > limits.max_prompts:
            raise RequestRejected(400, f"prompt: {len(prompts)} prompts exceed this server's limit of "
                                       f"{limits.max_prompts} per request")
        for index, prompt in enumerate(prompts):
            what = "prompt" if len(prompts) == 1 else f"prompt[{index}]"
            check_characters(len(prompt), what)
            if count_text_tokens is not None:
                check_length(int(count_text_tokens(prompt)), params, what)
        return request, params

    async def parsed(http_request: Request, parse: Callable[[bytes], ParsedT]) -> tuple[ParsedT, bool]:
        """The body read and validated (on a worker thread), and whether it was large (which a
        refusal carries too, so its memory is given back either way)."""
        raw = await read_body(http_request)
        large = len(raw) >= LARGE_REQUEST_BYTES
        try:
            return await asyncio.get_running_loop().run_in_executor(validator, parse, raw), large
        except RequestRejected as exc:
            exc.large = large
            raise

    def refused(exc: RequestRejected) -> JSONResponse:
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        response = _error(exc.status, exc.message, kind)
        response.background = _after(exc.large)
        return response

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(http_request: Request) -> JSONResponse | StreamingResponse:
        try:
            (request, params, chat), large = await parsed(http_request, parse_chat)
        except RequestRejected as exc:
            return refused(exc)
        large = large or any(message.images for message in chat)
        return await responder.answer(http_request, request, params, [chat], "chat", large)

    @app.post("/v1/completions", response_model=None)
    async def completions(http_request: Request) -> JSONResponse | StreamingResponse:
        try:
            (request, params), large = await parsed(http_request, parse_completion)
        except RequestRejected as exc:
            return refused(exc)
        return await responder.answer(http_request, request, params, request.prompts, "text", large)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}", "server_error")

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

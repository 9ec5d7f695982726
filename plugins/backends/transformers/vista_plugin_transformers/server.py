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

The parts, each tested without a server: :mod:`~vista_plugin_transformers.serve_validation` (the
checks, over a ``RequestRules``), :mod:`~vista_plugin_transformers.serve_answers` (queue and
answer), :mod:`~vista_plugin_transformers.serve_state` (the app's one state object) and
:mod:`~vista_plugin_transformers.serve_handlers` (the routes); :func:`create_app` wires them.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI

from vista_plugin_transformers import serve_handlers
from vista_plugin_transformers.serve_state import ServeState, lifespan
from vista_plugin_transformers.serve_validation import RequestRejected, ServeLimits
from vista_rl import ModelBackend
from vista_rl.serving import BearerAuth

__all__ = ["BackgroundServer", "RequestRejected", "ServeLimits", "create_app", "free_port", "wait_for_health"]


def create_app(backend: ModelBackend, model_name: str, *, batch_window_ms: float = 20.0,
               max_batch_size: int = 64, default_max_tokens: int = 256, limits: ServeLimits | None = None,
               token: str | None = None) -> FastAPI:
    """The FastAPI app: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
    ``POST /v1/completions`` (text prompts; when the backend has ``generate_text``), ``GET /stats``
    (batching counters).  It only wires the routes of :mod:`vista_plugin_transformers.serve_handlers`
    to one :class:`~vista_plugin_transformers.serve_state.ServeState`."""
    state = ServeState.build(backend, model_name, batch_window_ms=batch_window_ms, max_batch_size=max_batch_size,
                             default_max_tokens=default_max_tokens, limits=limits)
    app = FastAPI(title="vista serve", lifespan=lifespan)
    app.state.serve = state
    app.state.batcher = state.batcher
    app.state.limits = state.limits
    if token:
        app.add_middleware(BearerAuth, token=token, open_paths=("/health",),  # type: ignore[arg-type]
                           error_body=lambda message: {"error": {"message": message, "type": "authentication_error"}})
    app.add_api_route("/health", serve_handlers.health, methods=["GET"])
    app.add_api_route("/stats", serve_handlers.stats, methods=["GET"])
    app.add_api_route("/v1/models", serve_handlers.models, methods=["GET"])
    app.add_api_route("/v1/chat/completions", serve_handlers.chat_completions, methods=["POST"], response_model=None)
    app.add_api_route("/v1/completions", serve_handlers.completions, methods=["POST"], response_model=None)
    app.add_exception_handler(Exception, serve_handlers.unexpected)
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

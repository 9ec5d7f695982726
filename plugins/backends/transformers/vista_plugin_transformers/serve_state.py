"""The one object a ``vista serve`` app holds (``app.state.serve``): the request rules, the batcher,
the responder and the validation threads.  Built whole before the app exists, so the route handlers
(:mod:`vista_plugin_transformers.serve_handlers`) are plain module-level functions over it, and a
test can build one and call a handler without starting a server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request

from vista_plugin_transformers.openai_responses import TokenTexts
from vista_plugin_transformers.request_queue import RequestBatcher
from vista_plugin_transformers.serve_answers import Responder
from vista_plugin_transformers.serve_validation import RequestRules, ServeLimits
from vista_rl import ModelBackend


@dataclass
class ServeState:
    """What every handler of one app shares."""

    rules: RequestRules
    batcher: RequestBatcher
    responder: Responder
    #: JSON parsing and validation run here, never on the event loop or the generate thread
    validator: ThreadPoolExecutor

    @classmethod
    def build(cls, backend: ModelBackend, model_name: str, *, batch_window_ms: float = 20.0,
              max_batch_size: int = 64, default_max_tokens: int = 256,
              limits: ServeLimits | None = None) -> ServeState:
        limits = limits or ServeLimits()
        batcher = RequestBatcher(backend, window_s=batch_window_ms / 1000.0, max_batch_size=max_batch_size,
                                 max_queued_rows=limits.max_queued_rows, retry_after_s=limits.retry_after_s)
        validator = ThreadPoolExecutor(max_workers=limits.validation_threads, thread_name_prefix="vista-validate")
        texts = TokenTexts(getattr(backend, "tokenizer", None))
        return cls(RequestRules.for_backend(backend, model_name, limits, default_max_tokens), batcher,
                   Responder(batcher, texts, model_name, validator), validator)

    @property
    def limits(self) -> ServeLimits:
        return self.rules.limits

    async def start(self) -> None:
        await self.batcher.start()

    async def stop(self) -> None:
        await self.batcher.stop()
        self.validator.shutdown(wait=False, cancel_futures=True)


def state_of(request: Request) -> ServeState:
    """The :class:`ServeState` of the app serving ``request``."""
    state = request.app.state.serve
    assert isinstance(state, ServeState), "app.state.serve is set by create_app"
    return state


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the batcher with the app; on shutdown stop it and drop queued validations."""
    state: ServeState = app.state.serve
    await state.start()
    try:
        yield
    finally:
        await state.stop()

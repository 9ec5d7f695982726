"""The routes of ``vista serve``, as module-level functions over the app's
:class:`~vista_plugin_transformers.serve_state.ServeState` (``request.app.state.serve``):
``create_app`` only wires them, and each can be called with a Starlette ``Request`` in a test.

A body is read with its size counted as it streams in (413 past the limit), then parsed and
validated on a worker thread (:mod:`vista_plugin_transformers.serve_validation`), so ``/health``
answers while a large body is parsed; only a valid request is queued
(:mod:`vista_plugin_transformers.serve_answers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from vista_plugin_transformers.serve_answers import error_response, refused
from vista_plugin_transformers.serve_state import ServeState, state_of
from vista_plugin_transformers.serve_validation import RequestRejected, parse_chat, parse_completion
from vista_rl.serving import BodyTooLarge, read_limited_body

#: a body this large is "large": its memory is collected and trimmed once the response is sent
LARGE_REQUEST_BYTES = 1024 * 1024
ParsedT = TypeVar("ParsedT")


async def health(_request: Request) -> dict[str, str]:
    return {"status": "ok"}


async def stats(request: Request) -> dict[str, Any]:
    """The batcher's counters (requests, generate calls, batch sizes, queue refusals)."""
    return state_of(request).batcher.stats.to_dict()


async def models(request: Request) -> dict[str, Any]:
    rules = state_of(request).rules
    return {"object": "list",
            "data": [{"id": rules.model_name, "object": "model", "created": 0, "owned_by": "vista",
                      "max_model_len": rules.max_model_len}]}


async def read_body(state: ServeState, request: Request) -> bytes:
    """The body's bytes, refused (413) as soon as the declared or streamed size passes the limit."""
    try:
        return await read_limited_body(request.stream(), request.headers.get("content-length"),
                                       state.limits.max_body_bytes)
    except BodyTooLarge as exc:
        raise RequestRejected(413, str(exc)) from None


async def parsed(state: ServeState, request: Request, parse: Callable[[bytes], ParsedT]) -> tuple[ParsedT, bool]:
    """The body read and validated (on a worker thread), and whether it was large (which a
    refusal carries too, so its memory is given back either way)."""
    raw = await read_body(state, request)
    large = len(raw) >= LARGE_REQUEST_BYTES
    try:
        return await asyncio.get_running_loop().run_in_executor(state.validator, parse, raw), large
    except RequestRejected as exc:
        exc.large = large
        raise


async def chat_completions(http_request: Request) -> JSONResponse | StreamingResponse:
    """``POST /v1/chat/completions``."""
    state = state_of(http_request)
    try:
        (request, params, chat), large = await parsed(state, http_request, lambda raw: parse_chat(state.rules, raw))
    except RequestRejected as exc:
        return refused(exc)
    large = large or any(message.images for message in chat)
    return await state.responder.answer(http_request, request, params, [chat], "chat", large)


async def completions(http_request: Request) -> JSONResponse | StreamingResponse:
    """``POST /v1/completions`` (text prompts, for backends with ``generate_text``)."""
    state = state_of(http_request)
    try:
        (request, params), large = await parsed(state, http_request,
                                                lambda raw: parse_completion(state.rules, raw))
    except RequestRejected as exc:
        return refused(exc)
    return await state.responder.answer(http_request, request, params, request.prompts, "text", large)


async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
    """Any exception a handler did not turn into an answer: a 500 in OpenAI's error shape."""
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}", "server_error")

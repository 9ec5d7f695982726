"""How ``vista serve`` answers a request once it is valid: queue it, then send a live stream, a
replayed stream or one JSON body; a 503 when the queue is full, a 499 after a disconnect, and the
OpenAI-shaped error bodies.  Large requests give their memory back once the response is sent.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask, BackgroundTasks

from vista_plugin_transformers.live_stream import LiveStream
from vista_plugin_transformers.openai_responses import (
    StreamHeader,
    TokenTexts,
    chat_choice,
    completion_choice,
    request_usage,
    stream_events,
)
from vista_plugin_transformers.request_queue import QueueFull, RequestBatcher, results_unless_gone
from vista_plugin_transformers.serve_validation import RequestRejected
from vista_rl import Chat, Generation, SamplingParams
from vista_rl.limits import release_memory


def error_response(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    """An OpenAI-shaped error body."""
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})


def after(large: bool) -> BackgroundTask | None:
    """Once the response is sent (the request's objects dropped), give a large request's memory back."""
    return BackgroundTask(release_memory) if large else None


def failed(exc: Exception, large: bool) -> JSONResponse:
    """500: the generation itself failed (after the batch's one-by-one retry)."""
    response = error_response(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
    response.background = after(large)
    return response


def busy(exc: QueueFull, large: bool) -> JSONResponse:
    """503 with ``Retry-After`` (the official OpenAI client waits that long and retries)."""
    response = error_response(503, str(exc), "server_overloaded")
    response.headers["retry-after"] = str(exc.retry_after_s)
    response.background = after(large)
    return response


def refused(exc: RequestRejected) -> JSONResponse:
    """The client's error for a request that failed validation (404 for an unknown model)."""
    kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
    response = error_response(exc.status, exc.message, kind)
    response.background = after(exc.large)
    return response


def response_body(header: StreamHeader, request: Any, prompts: Sequence[Chat | str],
                  per_prompt: list[list[Generation]], texts: TokenTexts, chat: bool) -> dict[str, Any]:
    """The non-streamed JSON body (chat.completion or text_completion) of finished generations;
    choice index = prompt index * n + sample index, as OpenAI orders them."""
    logprobs = request.logprobs is not None and request.logprobs is not False
    choices = [(generation, 0 if chat else len(prompt))
               for prompt, generations in zip(prompts, per_prompt, strict=True) for generation in generations]
    if chat:
        body = [chat_choice(index, generation, texts, logprobs=request.logprobs, token_ids=request.return_token_ids)
                for index, (generation, _) in enumerate(choices)]
    else:
        body = [completion_choice(index, generation, texts, logprobs=logprobs, prompt_chars=prompt_chars,
                                  token_ids=request.return_token_ids)
                for index, (generation, prompt_chars) in enumerate(choices)]
    return {"id": header.id, "object": "chat.completion" if chat else "text_completion",
            "created": header.created, "model": header.model, "choices": body,
            "usage": request_usage(per_prompt), **token_id_extra(request, per_prompt, chat)}


def token_id_extra(request: Any, per_prompt: list[list[Generation]], chat: bool) -> dict[str, Any]:
    """``prompt_token_ids`` when the request asked for ``return_token_ids`` (one list for a chat,
    one per prompt for completions)."""
    if not request.return_token_ids:
        return {}
    prompt_ids = [list(generations[0].prompt_token_ids or []) for generations in per_prompt]
    return {"prompt_token_ids": prompt_ids[0] if chat else prompt_ids}


@dataclass
class Responder:
    """Queues a validated request and answers it: a live stream, a replayed stream or one JSON
    body; a 503 when the queue is full; nothing useful (the client is gone) after a disconnect."""

    batcher: RequestBatcher
    texts: TokenTexts
    model_name: str
    workers: ThreadPoolExecutor  # builds replayed streams off the event loop

    def header(self, request: Any, chat: bool) -> StreamHeader:
        return StreamHeader(f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                            "chat.completion.chunk" if chat else "text_completion", int(time.time()),
                            self.model_name, request.include_usage)

    def live_stream(self, header: StreamHeader, request: Any, params: SamplingParams, prompts: int,
                    kind: str) -> LiveStream | None:
        """A stream that sends tokens as they are sampled, where the backend takes ``control`` and
        the request asks for neither logprobs nor token ids (those replay the finished generation)."""
        logprobs = request.logprobs is not None and request.logprobs is not False
        if (request.stream and self.batcher.controls[kind] and not logprobs and not request.return_token_ids
                and self.texts.tokenizer is not None):
            return LiveStream(header, self.texts.tokenizer, params.n, prompts, params.stop)
        return None

    async def answer(self, http_request: Request, request: Any, params: SamplingParams,
                     prompts: Sequence[Chat | str], kind: str, large: bool) -> JSONResponse | StreamingResponse:
        chat = kind == "chat"
        header = self.header(request, chat)
        live = self.live_stream(header, request, params, len(prompts), kind)
        try:
            ticket = self.batcher.enqueue(prompts, params, kind=kind, top_logprobs=request.top_logprobs_wanted,
                                          sink=live)
        except QueueFull as exc:
            return busy(exc, large)
        if live is not None:
            async def drop() -> None:  # on the event loop (a sync task would run on a worker thread)
                self.batcher.cancel(ticket)
                ticket.members.clear()  # the prompts (images) go before the memory release below

            # the background runs after the stream ends, even when a disconnect cancelled it before
            # its generator started (so the generator's own ``finally`` never ran)
            cleanup = BackgroundTasks([BackgroundTask(drop), *filter(None, [after(large)])])
            return StreamingResponse(live.events(ticket, self.batcher.cancel), media_type="text/event-stream",
                                     background=cleanup, headers={"cache-control": "no-cache"})
        try:
            per_prompt = await results_unless_gone(self.batcher, ticket, http_request.receive)
        except Exception as exc:  # noqa: BLE001 - reported to the client as a server error
            return failed(exc, large)
        if per_prompt is None:  # nobody reads this answer
            gone = error_response(499, "the client closed the connection; its generation was cancelled",
                                  "client_closed")
            gone.background = after(large)
            return gone
        if request.stream:
            return await self.replayed_stream(header, request, prompts, per_prompt, chat, large)
        body = response_body(header, request, prompts, per_prompt, self.texts, chat)
        return JSONResponse(body, background=after(large))

    async def replayed_stream(self, header: StreamHeader, request: Any, prompts: Sequence[Chat | str],
                              per_prompt: list[list[Generation]], chat: bool, large: bool) -> StreamingResponse:
        """The finished generations sent as server-sent events, token by token (built on a worker thread)."""
        logprobs = request.logprobs is not None and request.logprobs is not False
        choices = [(generation, 0 if chat else len(prompt))
                   for prompt, generations in zip(prompts, per_prompt, strict=True) for generation in generations]
        extra = token_id_extra(request, per_prompt, chat)
        events = await asyncio.get_running_loop().run_in_executor(self.workers, lambda: list(stream_events(
            header, choices, self.texts, logprobs=logprobs, token_ids=request.return_token_ids,
            total_usage=request_usage(per_prompt), first_extra=extra)))
        return StreamingResponse(iter(events), media_type="text/event-stream", background=after(large),
                                 headers={"cache-control": "no-cache"})

"""Streaming tokens as they are sampled (``stream: true`` on a backend that takes ``control``).

The generate thread hands each decode step's tokens to a :class:`LiveStream` (the request's
:class:`~vista_plugin_transformers.request_queue.TokenSink`), which passes them to the event loop;
the response's event generator turns them into text and sends a chunk per step.  Batching is
kept: every row of a ``generate`` call streams, whatever ``n`` and whoever else shares the call.

Text is released conservatively, so that the streamed text always equals the non-streamed text:

- tokens are detokenized incrementally (a token ending mid-character adds nothing until the
  character completes);
- with stop strings, the last ``len(longest stop) - 1`` characters are held back until the text
  shows they cannot start a stop string, and nothing from a stop string on is ever sent (the
  finished generation cuts it there);
- when the generation settles, whatever of its final text was not yet sent goes out in one last
  text chunk, then each choice's ``finish_reason``, the usage chunk when asked and ``[DONE]``.

A failure after the stream began is sent as an ``error`` event before ``[DONE]`` (the 200 status
is already sent), as vLLM does.  When the client disconnects, the server cancels the stream's task
and :meth:`LiveStream.events` cancels the request in its ``finally``, which stops its rows at
the next decode step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from vista_plugin_transformers.openai_responses import (
    IncrementalDecoder,
    StreamHeader,
    opening_choices,
    request_usage,
    sse,
    stream_chunk,
    stream_end,
    text_choice,
)
from vista_plugin_transformers.request_queue import Pending, Ticket

LOG = logging.getLogger(__name__)


class LiveText:
    """One choice's text as its tokens arrive, and how much of it may be sent yet."""

    def __init__(self, tokenizer: Any, stop: Sequence[str] = ()) -> None:
        self.decoder = IncrementalDecoder(tokenizer)
        self.stop = [text for text in stop if text]
        self.hold = max((len(text) for text in self.stop), default=1) - 1
        self.released = ""
        self.stopped = False

    def add(self, token_id: int) -> str:
        """The text that may be sent now that ``token_id`` arrived (often empty)."""
        if self.stopped:
            return ""
        self.decoder.add(token_id)
        text = self.decoder.text
        limit = len(text)
        if self.stop:
            hits = [found for found in (text.find(stop) for stop in self.stop) if found >= 0]
            if hits:
                limit, self.stopped = min(hits), True
            else:
                limit -= self.hold
        if limit <= len(self.released):
            return ""
        new = text[len(self.released):limit]
        self.released += new
        return new

    def rest(self, final_text: str) -> str:
        """What of the finished generation's text has not been sent.  Should the released text not
        start it (a tokenizer whose prefixes decode differently), nothing more is sent, and the
        mismatch is logged."""
        if final_text.startswith(self.released):
            return final_text[len(self.released):]
        LOG.warning("streamed text %r is not a prefix of the final text %r", self.released[:80], final_text[:80])
        return ""


class LiveStream:
    """One streamed request's tokens, from the generate thread to its response's events.

    Choice ``i`` is sample ``i % n`` of the request's prompt ``i // n`` (the order OpenAI uses for
    ``/v1/completions`` with several prompts)."""

    def __init__(self, header: StreamHeader, tokenizer: Any, n: int, prompts: int, stop: Sequence[str] = ()) -> None:
        self.header = header
        self.chat = header.object == "chat.completion.chunk"
        self.n = n
        self.texts = [LiveText(tokenizer, stop) for _ in range(n * prompts)]
        self._loop = asyncio.get_running_loop()
        self._inbox: asyncio.Queue[tuple[Pending, list[tuple[int, int]] | None]] = asyncio.Queue()

    def tokens(self, member: Pending, pairs: list[tuple[int, int]]) -> None:
        """On the generate thread: one step's ``(sample, token)`` pairs of ``member``."""
        self._loop.call_soon_threadsafe(self._inbox.put_nowait, (member, pairs))

    def settled(self, member: Pending) -> None:
        """On the event loop, after every token of ``member`` was put."""
        self._inbox.put_nowait((member, None))

    async def events(self, ticket: Ticket, cancel: Callable[[Ticket], None]) -> AsyncIterator[str]:
        """The response body; ``cancel(ticket)`` runs whenever it ends (a no-op once settled)."""
        try:
            if self.chat:
                yield sse(stream_chunk(self.header, opening_choices(len(self.texts))))
            waiting = len(ticket.members)
            while waiting:
                member, pairs = await self._inbox.get()
                if pairs is None:
                    waiting -= 1
                    continue
                base = ticket.members.index(member) * self.n
                choices = [text_choice(base + sample, delta, self.chat) for sample, token in pairs
                           if (delta := self.texts[base + sample].add(token))]
                if choices:
                    yield sse(stream_chunk(self.header, choices))
            for event in self._ending(ticket):
                yield event
        finally:
            cancel(ticket)

    def _ending(self, ticket: Ticket) -> list[str]:
        """The events after the last token: the rest of each text, finish reasons, usage, done."""
        try:
            per_prompt = [member.future.result() for member in ticket.members]
        except Exception as exc:  # noqa: BLE001 - the status is sent already: an error event says it
            message = f"generation failed: {type(exc).__name__}: {exc}"
            return [sse({"error": {"message": message, "type": "server_error"}}), sse("[DONE]")]
        finals = [generation for generations in per_prompt for generation in generations]
        rests = [text_choice(index, rest, self.chat) for index, (live, final) in enumerate(zip(self.texts, finals,
                                                                                             strict=True))
                 if (rest := live.rest(final.text))]
        events = [sse(stream_chunk(self.header, rests))] if rests else []
        events += stream_end(self.header, [final.finish_reason for final in finals], request_usage(per_prompt))
        return events

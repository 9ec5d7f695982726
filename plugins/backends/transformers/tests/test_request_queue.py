"""The batching queue (``request_queue``), live text release (``live_stream``) and the generate-time
control (``generation_control``) on their own: bounds, cancellation of queued and running work, and
tokens handed over as they are sampled (issue 33 item 3)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.live_stream import LiveText
from vista_plugin_transformers.request_queue import (
    Pending,
    QueueFull,
    RequestBatcher,
    results_unless_gone,
)

from vista_rl import Chat, Generation, Message, ModelBackend, SamplingParams


class _GatedBackend(ModelBackend):
    """A fake backend (named as such: it tests the queue, not a model) whose first call blocks
    until ``gate`` is set, so requests can be made to wait in the queue; it records each call's
    prompts."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls: list[list[str]] = []

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        self.calls.append([chat[0].content for chat in chats])
        if len(self.calls) == 1:
            assert self.gate.wait(30)
        return [[Generation(text=chat[0].content) for _ in range(params.n)] for chat in chats]


def _chat(text: str) -> Chat:
    return [Message("user", text)]


async def _until(predicate: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


def test_a_cancelled_queued_request_never_reaches_the_backend() -> None:
    async def scenario() -> None:
        backend = _GatedBackend()
        batcher = RequestBatcher(backend, window_s=0.001)
        await batcher.start()
        try:
            first = batcher.enqueue([_chat("first")], SamplingParams(max_tokens=4))
            await _until(lambda: backend.calls)  # the generate thread is busy with "first"
            second = batcher.enqueue([_chat("second")], SamplingParams(max_tokens=4, n=2))
            assert batcher.stats.queued_rows == 2
            batcher.cancel(second)
            assert batcher.stats.queued_rows == 0 and batcher.stats.cancelled_queued == 1
            assert second.members[0].prompt == []  # its images are not held while it waits to be skipped
            third = batcher.enqueue([_chat("third")], SamplingParams(max_tokens=4, temperature=0.5))
            backend.gate.set()
            assert (await first.results())[0][0].text == "first"
            assert (await third.results())[0][0].text == "third"
            assert second.members[0].future.cancelled()
            assert backend.calls == [["first"], ["third"]]
        finally:
            await batcher.stop()

    asyncio.run(scenario())


def test_the_queue_bound_counts_rows_and_admits_a_request_alone_in_an_empty_queue() -> None:
    async def scenario() -> None:
        backend = _GatedBackend()
        batcher = RequestBatcher(backend, window_s=0.001, max_queued_rows=4, retry_after_s=9)
        await batcher.start()
        try:
            batcher.enqueue([_chat("big")], SamplingParams(max_tokens=4, n=8))  # over the bound, but alone
            await _until(lambda: backend.calls)
            waiting = batcher.enqueue([_chat("a"), _chat("b")], SamplingParams(max_tokens=4, n=2))
            with pytest.raises(QueueFull) as full:
                batcher.enqueue([_chat("c")], SamplingParams(max_tokens=4))
            assert full.value.retry_after_s == 9 and "--max-queued-rows" in str(full.value)
            assert batcher.stats.rejected_queue_full == 1
            batcher.cancel(waiting)
            admitted = batcher.enqueue([_chat("c")], SamplingParams(max_tokens=4))
            backend.gate.set()
            assert (await admitted.results())[0][0].text == "c"
            assert batcher.stats.queued_rows == 0
        finally:
            await batcher.stop()

    asyncio.run(scenario())


def test_results_unless_gone_cancels_the_request_when_the_connection_drops() -> None:
    async def scenario() -> None:
        backend = _GatedBackend()
        batcher = RequestBatcher(backend, window_s=0.001)
        await batcher.start()
        messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        try:
            ticket = batcher.enqueue([_chat("left")], SamplingParams(max_tokens=4))
            waiter = asyncio.create_task(results_unless_gone(batcher, ticket, messages.get))
            await _until(lambda: backend.calls)
            assert not waiter.done()
            await messages.put({"type": "http.disconnect"})
            assert await asyncio.wait_for(waiter, 10) is None
            assert ticket.cancelled.is_set() and batcher.stats.cancelled_running == 1
        finally:
            backend.gate.set()
            await batcher.stop()

    asyncio.run(scenario())


class _StreamingThenFailing(ModelBackend):
    """A fake backend that takes ``control``: it hands one token per row to the caller, then fails
    any call with more than one prompt (a failure validation could not foresee)."""

    def generate(self, chats: Sequence[Chat], params: SamplingParams, *,
                 control: Any = None) -> list[list[Generation]]:
        if control is not None:
            control.on_tokens({row: 7 for row in range(len(chats) * params.n)})
        if len(chats) > 1:
            raise RuntimeError("batch failed mid-generation")
        return [[Generation(text="ok", token_ids=[7])] for _ in chats]


class _Sink:
    def __init__(self) -> None:
        self.pairs: list[tuple[int, int]] = []

    def tokens(self, member: Pending, pairs: list[tuple[int, int]]) -> None:
        self.pairs.extend(pairs)

    def settled(self, member: Pending) -> None:
        pass


def test_a_member_that_already_streamed_is_not_retried_after_its_batch_fails() -> None:
    async def scenario() -> None:
        batcher = RequestBatcher(_StreamingThenFailing(), window_s=0.05)
        await batcher.start()
        try:
            sink = _Sink()
            streamed = batcher.enqueue([_chat("s")], SamplingParams(max_tokens=4), sink=sink)
            plain = batcher.enqueue([_chat("p")], SamplingParams(max_tokens=4))
            with pytest.raises(RuntimeError, match="mid-generation"):
                await streamed.results()  # a retry would stream its text twice
            assert (await plain.results())[0][0].text == "ok"  # retried alone
            assert sink.pairs == [(0, 7)]
        finally:
            await batcher.stop()

    asyncio.run(scenario())


# ------------------------------------------------------------------ live text release

def test_live_text_never_sends_a_stop_string_and_joins_to_the_final_text(backend: TransformersBackend) -> None:
    tokenizer = backend.tokenizer
    ids = tokenizer("left up right STOP down", add_special_tokens=False)["input_ids"]
    live = LiveText(tokenizer, stop=["STOP", "never-seen"])
    sent = "".join(live.add(token) for token in ids)
    assert sent == "left up right " and live.stopped
    assert sent + live.rest("left up right ") == "left up right "
    plain = LiveText(tokenizer)
    sent = "".join(plain.add(token) for token in ids)
    assert sent == tokenizer.decode(ids, skip_special_tokens=True)
    assert plain.rest(sent) == ""


def test_live_text_holds_back_what_could_still_become_a_stop_string(backend: TransformersBackend) -> None:
    tokenizer = backend.tokenizer
    live = LiveText(tokenizer, stop=["abcdef"])
    sent = "".join(live.add(token) for token in tokenizer("xyz abcde", add_special_tokens=False)["input_ids"])
    assert live.decoder.text == "xyz abcde" and not live.stopped
    assert sent == "xyz "  # "abcde" may still become "abcdef": held back
    assert live.rest("xyz abcde") == "abcde"  # the generation ended there: the rest goes out


def test_a_run_of_special_tokens_is_not_decoded_again_at_every_step(backend: TransformersBackend) -> None:
    from vista_plugin_transformers.openai_responses import IncrementalDecoder

    class Recording:  # the real tokenizer, noting how many ids each decode is given
        def __init__(self, tokenizer: Any) -> None:
            self.tokenizer = tokenizer
            self.longest = 0

        def decode(self, ids: list[int], **kwargs: Any) -> str:
            self.longest = max(self.longest, len(ids))
            return str(self.tokenizer.decode(ids, **kwargs))

    special = backend.tokenizer.all_special_ids[0]
    recording = Recording(backend.tokenizer)
    decoder = IncrementalDecoder(recording)
    for token in [special] * 2000 + backend.tokenizer("left", add_special_tokens=False)["input_ids"]:
        decoder.add(token)
    assert decoder.text == "left"
    assert recording.longest < 10  # was 2000+: every step decoded the whole run (3.1 s for 4000 tokens)


# ------------------------------------------------------------------ control inside generate

class _Control:
    """Cancels rows once they have ``after`` tokens (``None``: never); records every token."""

    def __init__(self, rows: int, cancel_rows: set[int], after: int | None) -> None:
        self.tokens: dict[int, list[int]] = {row: [] for row in range(rows)}
        self.cancel_rows = cancel_rows
        self.after = after
        self.stopped: set[int] = set()

    def cancelled(self, row: int) -> bool:
        return row in self.stopped

    def on_tokens(self, tokens: dict[int, int]) -> None:
        for row, token in tokens.items():
            self.tokens[row].append(token)
            if row in self.cancel_rows and self.after is not None and len(self.tokens[row]) >= self.after:
                self.stopped.add(row)


def test_tokens_arrive_as_sampled_and_a_cancelled_row_stops_at_the_next_step(backend: TransformersBackend) -> None:
    params = SamplingParams(temperature=0.0, max_tokens=120, n=2)
    control = _Control(rows=2, cancel_rows={1}, after=5)
    row0, row1 = backend.generate([_chat("hi")], params, control=control)[0]
    assert control.tokens[0] == row0.token_ids and len(row0.token_ids) > 20  # every token, in order
    assert len(control.tokens[1]) == 5  # nothing after the cancel reached the caller
    assert row1.token_ids[:5] == control.tokens[1]


def test_a_call_whose_rows_are_all_cancelled_returns_within_a_step(backend: TransformersBackend) -> None:
    params = SamplingParams(temperature=0.0, max_tokens=400, n=3)
    control = _Control(rows=3, cancel_rows={0, 1, 2}, after=4)
    generations = backend.generate([_chat("hi")], params, control=control)[0]
    assert all(len(generation.token_ids) <= 5 for generation in generations)

    calls = backend.timings.calls
    gone = _Control(rows=3, cancel_rows=set(), after=None)
    gone.stopped = {0, 1, 2}
    skipped = backend.generate([_chat("hi")], params, control=gone)[0]
    assert [generation.finish_reason for generation in skipped] == ["abort"] * 3
    assert backend.timings.calls == calls  # not even encoded

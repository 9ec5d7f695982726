"""The batching queue behind ``vista serve``: bounded, and it drops work for clients that have gone.

Requests arriving within ``window_s`` of each other join one ``generate`` call per distinct set of
sampling parameters (rollout workers that each send one chat at a time still get batched
generation).  Generation runs on one worker thread, so the event loop keeps accepting requests
while a batch is generated.

Why bounded and cancellable: six streamed ``n=16, max_tokens=512`` requests whose sockets closed
at once held the generate thread for 60 s, and every later request waited behind them; nothing
limited how much work could queue.  So:

- the queue holds at most ``max_queued_rows`` rows (prompts x ``n``) not yet being generated;
  past it :meth:`RequestBatcher.enqueue` raises :class:`QueueFull` (the server answers 503 with
  ``Retry-After``).  A request alone in an empty queue is always admitted, so no request is
  refused forever;
- :meth:`RequestBatcher.cancel` drops a request: still queued, it never runs; running, its rows
  stop at the next decode step when the backend takes a ``control`` (the transformers backend
  does, see :mod:`~vista_plugin_transformers.generation_control`), and a ``generate`` call whose
  rows are all cancelled returns at once;
- :func:`results_unless_gone` waits for a request's generations while watching the ASGI
  connection, and cancels them when the client disconnects first.

Counters are in :class:`BatchStats` (``GET /stats``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from vista_rl import Chat, Generation, ModelBackend, SamplingParams


class QueueFull(Exception):
    """The queue holds as many rows as it may; the client should retry after ``retry_after_s``."""

    def __init__(self, queued_rows: int, rows: int, limit: int, retry_after_s: int) -> None:
        super().__init__(f"the server is busy: {queued_rows} generations are waiting and this request adds {rows}, "
                         f"over the queue limit of {limit} (vista serve --max-queued-rows); retry in "
                         f"{retry_after_s} s")
        self.retry_after_s = retry_after_s


class TokenSink(Protocol):
    """Where a streamed request's tokens go as they are sampled."""

    def tokens(self, member: Pending, pairs: list[tuple[int, int]]) -> None:
        """One decode step of ``member``: ``(sample index, token id)`` pairs.  Called on the generate
        thread: hand them to the event loop with ``call_soon_threadsafe``."""

    def settled(self, member: Pending) -> None:
        """``member``'s future is done (called on the event loop, after all its tokens)."""


@dataclass
class Ticket:
    """One HTTP request's generations: one :class:`Pending` per prompt, and one cancel flag the
    generate thread reads between decode steps."""

    members: list[Pending] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    sink: TokenSink | None = None

    @property
    def rows(self) -> int:
        return sum(member.params.n for member in self.members)

    async def results(self) -> list[list[Generation]]:
        """Per prompt, its ``n`` generations (the first failure raises)."""
        return list(await asyncio.gather(*(member.future for member in self.members)))


@dataclass
class Pending:
    """One prompt of a request, waiting for (or in) a ``generate`` call."""

    prompt: Chat | str
    params: SamplingParams
    future: asyncio.Future[list[Generation]]
    ticket: Ticket
    kind: str = "chat"  # "chat" (backend.generate) or "text" (backend.generate_text, no chat template)
    top_logprobs: int = 0
    #: "queued" (counted against the queue bound), "running", "cancelled" or "settled"
    state: str = "queued"
    #: tokens already went to a live stream: a failed batch is not silently retried for it
    streamed: bool = False

    def group(self) -> str:
        """Requests with the same key share one generate call."""
        return f"{self.kind}|{self.top_logprobs}|{self.params.model_dump_json()}"


@dataclass
class BatchStats:
    """Counters exposed at ``GET /stats``: how well requests are batched, and what the queue
    bound and client disconnects saved."""

    requests: int = 0
    generate_calls: int = 0
    largest_batch: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    queued_rows: int = 0
    rejected_queue_full: int = 0
    cancelled_queued: int = 0
    cancelled_running: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "generate_calls": self.generate_calls,
                "largest_batch": self.largest_batch, "recent_batch_sizes": self.batch_sizes[-32:],
                "queued_rows": self.queued_rows, "rejected_queue_full": self.rejected_queue_full,
                "cancelled_queued": self.cancelled_queued, "cancelled_running": self.cancelled_running}


class _GroupControl:
    """The :class:`~vista_plugin_transformers.generation_control.GenerationControl` of one group's
    ``generate`` call: row ``r`` is sample ``r % n`` of member ``r // n``."""

    def __init__(self, members: Sequence[Pending]) -> None:
        self.members = members
        self.n = members[0].params.n

    def cancelled(self, row: int) -> bool:
        return self.members[row // self.n].ticket.cancelled.is_set()

    def on_tokens(self, tokens: dict[int, int]) -> None:
        by_member: dict[int, list[tuple[int, int]]] = {}
        for row, token in tokens.items():
            by_member.setdefault(row // self.n, []).append((row % self.n, token))
        for index, pairs in by_member.items():
            member = self.members[index]
            if member.ticket.sink is not None:
                member.streamed = True
                member.ticket.sink.tokens(member, pairs)


def takes_control(method: Callable[..., Any] | None) -> bool:
    """Whether a backend method accepts ``control=`` (cancellation and live tokens)."""
    return method is not None and "control" in inspect.signature(method).parameters


class RequestBatcher:
    """The queue and the generate thread (see the module docstring)."""

    def __init__(self, backend: ModelBackend, window_s: float = 0.005, max_batch_size: int = 64,
                 max_queued_rows: int = 1024, retry_after_s: int = 2) -> None:
        self.backend = backend
        self.window_s = window_s
        self.max_batch_size = max_batch_size
        self.max_queued_rows = max_queued_rows
        self.retry_after_s = retry_after_s
        self.stats = BatchStats()
        self.controls = {"chat": takes_control(backend.generate),
                         "text": takes_control(getattr(backend, "generate_text", None))}
        self._queue: asyncio.Queue[Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vista-generate")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def enqueue(self, prompts: Sequence[Chat | str], params: SamplingParams, *, kind: str = "chat",
                top_logprobs: int = 0, sink: TokenSink | None = None) -> Ticket:
        """Queue one request (one member per prompt), or raise :class:`QueueFull`."""
        if self._queue is None:
            raise RuntimeError("batcher not started")
        rows = len(prompts) * params.n
        queued = self.stats.queued_rows
        if queued and queued + rows > self.max_queued_rows:
            self.stats.rejected_queue_full += 1
            raise QueueFull(queued, rows, self.max_queued_rows, self.retry_after_s)
        loop = asyncio.get_running_loop()
        ticket = Ticket(sink=sink)
        for prompt in prompts:
            member = Pending(prompt, params, loop.create_future(), ticket, kind, top_logprobs)
            ticket.members.append(member)
            self._queue.put_nowait(member)
        self.stats.requests += len(prompts)
        self.stats.queued_rows += rows
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """Drop a request whose client has gone: queued members never run, running ones stop at
        the next decode step.  Settled members are left as they are."""
        ticket.cancelled.set()
        for member in ticket.members:
            if member.state == "queued":
                self.stats.queued_rows -= member.params.n
                self.stats.cancelled_queued += 1
                # it stays in the asyncio queue until the generate loop skips it: without its
                # prompt (images), so clients that connect and leave cannot pile up memory there
                member.prompt = []
            elif member.state == "running":
                self.stats.cancelled_running += 1
            else:
                continue
            member.state = "cancelled"
            member.future.cancel()

    def _start(self, member: Pending) -> bool:
        """Move a member out of the queue's count as its generation starts; False if cancelled."""
        if member.state != "queued":
            return False
        member.state = "running"
        self.stats.queued_rows -= member.params.n
        return True

    def _generate(self, members: list[Pending]) -> list[list[Generation]]:
        """One backend call for a group (on the generate thread).  ``top_logprobs`` and ``control``
        are passed only when used, so a backend without them still serves every other request."""
        first = members[0]
        prompts: list[Any] = [member.prompt for member in members]
        extra: dict[str, Any] = {"top_logprobs": first.top_logprobs} if first.top_logprobs else {}
        if self.controls[first.kind]:
            extra["control"] = _GroupControl(members)
        if first.kind == "text":
            return self.backend.generate_text(prompts, first.params, **extra)  # type: ignore[attr-defined,no-any-return]
        return self.backend.generate(prompts, first.params, **extra)

    async def _next(self) -> Pending:
        """The next queued member not cancelled while it waited."""
        assert self._queue is not None
        while True:
            member = await self._queue.get()
            if member.state == "queued":
                return member

    async def _collect(self) -> list[Pending]:
        batch = [await self._next()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.window_s
        while len(batch) < self.max_batch_size:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._next(), remaining))
            except asyncio.TimeoutError:
                break
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            groups: dict[str, list[Pending]] = {}
            for pending in batch:
                groups.setdefault(pending.group(), []).append(pending)
            for waiting in groups.values():
                members = [member for member in waiting if self._start(member)]  # some left while waiting
                if not members:
                    continue
                self.stats.generate_calls += 1
                self.stats.largest_batch = max(self.stats.largest_batch, len(members))
                self.stats.batch_sizes.append(len(members))
                try:
                    outputs = await loop.run_in_executor(self._executor, self._generate, members)
                except Exception as exc:  # noqa: BLE001 - isolate the request that caused it
                    await self._after_failure(members, exc)
                    continue
                for member, generations in zip(members, outputs, strict=True):
                    _settle(member, generations)

    async def _after_failure(self, members: list[Pending], exc: Exception) -> None:
        """A group's call failed: run each request alone so only the one(s) at fault get the
        error.  A member whose tokens already went to a live stream gets the error instead (a
        retry would stream its text twice)."""
        if len(members) == 1:
            _settle(members[0], exc)
            return
        loop = asyncio.get_running_loop()
        for member in members:
            if member.streamed or member.state != "running":
                _settle(member, exc)
                continue
            self.stats.generate_calls += 1
            try:
                outputs = await loop.run_in_executor(self._executor, self._generate, [member])
                _settle(member, outputs[0])
            except Exception as retry_exc:  # noqa: BLE001
                _settle(member, retry_exc)


def _settle(member: Pending, outcome: list[Generation] | BaseException) -> None:
    if member.state == "running":
        member.state = "settled"
    if not member.future.done():
        if isinstance(outcome, BaseException):
            member.future.set_exception(outcome)
        else:
            member.future.set_result(outcome)
    if member.ticket.sink is not None and member.state == "settled":
        member.ticket.sink.settled(member)


Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


async def wait_for_disconnect(receive: Receive) -> None:
    """Return when the ASGI connection reports ``http.disconnect``.  Call it only once the
    request body has been read: every other message is dropped."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def results_unless_gone(batcher: RequestBatcher, ticket: Ticket,
                              receive: Receive) -> list[list[Generation]] | None:
    """The ticket's generations, or None when the client disconnected first (the ticket is then
    cancelled).  A generation failure raises.  If this coroutine is itself cancelled, so is the
    ticket."""
    results = asyncio.ensure_future(ticket.results())
    gone = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait({results, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not results.done():
            batcher.cancel(ticket)
            results.cancel()
    if not results.done() or results.cancelled():
        return None
    return results.result()

"""A pool of daemon threads that runs env and tool calls with per-call timeouts.

Why not ``concurrent.futures.ThreadPoolExecutor``: a call that hangs forever keeps an executor thread
busy, and the executor joins its threads at interpreter exit, so one hung env would hang the whole
program.  Here threads are daemons, a call that runs past its timeout is written off (its thread is
replaced so the pool keeps its capacity), and the caller gets a :class:`CallOutcome` either way.

The episode driver's calls (:class:`~vista_rl.rollout.calls.Call`) run here: :meth:`CallPool.run_calls`
from a thread, :meth:`CallPool.run_calls_async` from asyncio (the caller's event loop is woken by the
worker; no executor thread waits on its behalf), and :func:`run_detached` for an ``env.close()`` that
nobody waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from vista_rl.rollout.calls import Call, CallOutcome

__all__ = ["CallOutcome", "CallPool", "PendingCall", "run_detached"]


class PendingCall:
    """A submitted call.  The timeout counts from when a worker starts it, not from submission."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._fn = fn
        self._args = args
        self._cond = threading.Condition()
        self._started: float | None = None
        self._finished = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._seconds = 0.0
        self._listeners: list[Callable[[], object]] = []
        self.abandoned = False

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Call ``listener`` (from the worker thread) when the call starts and when it finishes."""
        with self._cond:
            self._listeners.append(listener)

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()
            listeners = list(self._listeners)
        for listener in listeners:
            with contextlib.suppress(Exception):  # e.g. a waiter's event loop closed: never kill a worker
                listener()

    def run(self) -> None:
        with self._cond:
            self._started = time.monotonic()
        self._notify()
        value: Any = None
        error: BaseException | None = None
        try:
            value = self._fn(*self._args)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, none escapes a worker
            error = exc
        with self._cond:
            self._value, self._error, self._finished = value, error, True
            self._seconds = time.monotonic() - (self._started or time.monotonic())
        self._notify()

    def poll(self, timeout: float) -> tuple[CallOutcome | None, float | None]:
        """The outcome if the call finished or has run ``timeout`` seconds; else ``None`` and how long
        it may still run (``None``: not started yet, so its clock has not begun)."""
        with self._cond:
            if self._finished:
                return CallOutcome(self._value, self._error, False, self._seconds), 0.0
            if self._started is None:
                return None, None
            remaining = self._started + timeout - time.monotonic()
            if remaining <= 0:
                return CallOutcome(timed_out=True, seconds=time.monotonic() - self._started), 0.0
            return None, remaining

    def outcome(self, timeout: float) -> CallOutcome:
        """Wait until the call finishes or has run ``timeout`` seconds."""
        with self._cond:
            while True:
                outcome, remaining = self.poll(timeout)
                if outcome is not None:
                    return outcome
                self._cond.wait(remaining)

    async def outcome_async(self, timeout: float) -> CallOutcome:
        """:meth:`outcome` for a coroutine: the worker wakes the running event loop (no thread waits)."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        self.add_listener(lambda: loop.call_soon_threadsafe(changed.set))
        while True:
            changed.clear()  # before polling: a change after the poll sets it again
            outcome, remaining = self.poll(timeout)
            if outcome is not None:
                return outcome
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)


class CallPool:
    """``workers`` daemon threads fed from one FIFO queue.

    Wait on calls in submission order: the queue is FIFO, so a call waited on has either started or
    sits behind calls that are waited on (and, if hung, written off and replaced) first.
    """

    def __init__(self, workers: int, name: str = "vista-rollout") -> None:
        if workers < 1:
            raise ValueError("a call pool needs at least one worker")
        self._queue: queue.Queue[PendingCall | None] = queue.Queue()
        self._name = name
        self._alive = 0
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(workers):
            self._spawn()

    def _spawn(self) -> None:
        with self._lock:
            self._alive += 1
            index = self._alive
        threading.Thread(target=self._work, name=f"{self._name}-{index}", daemon=True).start()

    def _work(self) -> None:
        while True:
            call = self._queue.get()
            if call is None:
                break
            call.run()
            if call.abandoned:  # a replacement took this thread's place while it was hung
                break
        with self._lock:
            self._alive -= 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> PendingCall:
        if self._closed:
            raise RuntimeError("the call pool is closed")
        call = PendingCall(fn, args)
        self._queue.put(call)
        return call

    def wait(self, call: PendingCall, timeout: float) -> CallOutcome:
        """The call's outcome; a timed-out call's thread is replaced so capacity stays the same."""
        return self._written_off(call, call.outcome(timeout))

    async def wait_async(self, call: PendingCall, timeout: float) -> CallOutcome:
        """:meth:`wait` for a coroutine."""
        return self._written_off(call, await call.outcome_async(timeout))

    def _written_off(self, call: PendingCall, outcome: CallOutcome) -> CallOutcome:
        if outcome.timed_out and not call.abandoned:
            call.abandoned = True
            self._spawn()
        return outcome

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float) -> CallOutcome:
        return self.wait(self.submit(fn, *args), timeout)

    def submit_calls(self, calls: Sequence[Call]) -> list[PendingCall]:
        """Submit an episode's calls (wait on them with :meth:`wait_calls`)."""
        for call in calls:
            _timeout(call)  # refuse a call nobody could wait on before anything runs
        return [self.submit(call.fn, *call.args) for call in calls]

    def wait_calls(self, calls: Sequence[Call], pending: Sequence[PendingCall]) -> list[CallOutcome]:
        """The outcomes of :meth:`submit_calls`, waited on in order, each with its call's timeout."""
        return [self.wait(job, _timeout(call)) for call, job in zip(calls, pending, strict=True)]

    def run_calls(self, calls: Sequence[Call]) -> list[CallOutcome]:
        """Run calls concurrently: all submitted, then waited on in order."""
        return self.wait_calls(calls, self.submit_calls(calls))

    async def run_calls_async(self, calls: Sequence[Call]) -> list[CallOutcome]:
        """:meth:`run_calls`, awaited on the running event loop."""
        pending = self.submit_calls(calls)
        return [await self.wait_async(job, _timeout(call)) for call, job in zip(calls, pending, strict=True)]

    def close(self) -> None:
        """Stop idle workers; hung ones are daemons and die with the process."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            count = self._alive
        for _ in range(count):
            self._queue.put(None)


def _timeout(call: Call) -> float:
    if call.timeout_s is None:
        raise ValueError(f"{call.label}: a call without a timeout is not waited on (see run_detached)")
    return call.timeout_s


def run_detached(call: Call | None) -> None:
    """Start ``call`` on its own daemon thread and never wait on it (``env.close()`` of a misbehaving
    env may hang too); whatever it raises is dropped, the episode being recorded already."""
    if call is not None:
        threading.Thread(target=_quietly, args=(call,), name=f"vista-{call.kind.value}", daemon=True).start()


def _quietly(call: Call) -> None:
    with contextlib.suppress(Exception):
        call.fn(*call.args)

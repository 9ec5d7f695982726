"""A pool of daemon threads that runs env and tool calls with per-call timeouts.

Why not ``concurrent.futures.ThreadPoolExecutor``: a call that hangs forever keeps an executor thread
busy, and the executor joins its threads at interpreter exit, so one hung env would hang the whole
program.  Here threads are daemons, a call that runs past its timeout is written off (its thread is
replaced so the pool keeps its capacity), and the caller gets a :class:`CallOutcome` either way.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class CallOutcome:
    """How one call ended: a value, an exception, or a timeout (then ``value`` is ``None``)."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out

    def describe(self, what: str, timeout: float) -> str:
        """A one-line reason for a trajectory's ``failure`` field."""
        if self.timed_out:
            return f"{what} timed out after {timeout:g}s"
        if self.error is not None:
            return f"{what} raised {type(self.error).__name__}: {self.error}"
        return f"{what} succeeded"


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
        self.abandoned = False

    def run(self) -> None:
        with self._cond:
            self._started = time.monotonic()
            self._cond.notify_all()
        value: Any = None
        error: BaseException | None = None
        try:
            value = self._fn(*self._args)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, none escapes a worker
            error = exc
        with self._cond:
            self._value, self._error, self._finished = value, error, True
            self._seconds = time.monotonic() - (self._started or time.monotonic())
            self._cond.notify_all()

    def outcome(self, timeout: float) -> CallOutcome:
        """Wait until the call finishes or has run ``timeout`` seconds."""
        with self._cond:
            while not self._finished:
                if self._started is None:
                    self._cond.wait()
                    continue
                remaining = self._started + timeout - time.monotonic()
                if remaining <= 0:
                    return CallOutcome(timed_out=True, seconds=time.monotonic() - self._started)
                self._cond.wait(remaining)
            return CallOutcome(self._value, self._error, False, self._seconds)


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
        outcome = call.outcome(timeout)
        if outcome.timed_out and not call.abandoned:
            call.abandoned = True
            self._spawn()
        return outcome

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float) -> CallOutcome:
        return self.wait(self.submit(fn, *args), timeout)

    def close(self) -> None:
        """Stop idle workers; hung ones are daemons and die with the process."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            count = self._alive
        for _ in range(count):
            self._queue.put(None)

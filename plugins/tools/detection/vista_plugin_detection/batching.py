"""Micro-batching: many threads each submit one item; one worker thread runs them as a batch.

Why: the rollout engine runs the tool calls of all live episodes concurrently on a thread pool, one
call per thread.  A detector or a VLM answers a batch of 16 in little more than the time of one, so
calls that arrive within ``max_wait_s`` of each other are gathered into one forward pass (or one
backend ``generate``) instead of 16.  Callers still see a plain blocking call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Out = TypeVar("Out")


@dataclass
class _Pending(Generic[Item]):
    item: Item
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


@dataclass
class BatchStats:
    """How the batcher has grouped calls so far (tests and benchmarks read it)."""

    batches: int = 0
    items: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)


class MicroBatcher(Generic[Item, Out]):
    """``run_batch(items)`` returns one output per item (or an exception instance in an item's
    place, which is raised to that caller only).  An exception raised by ``run_batch`` itself goes
    to every caller of that batch; the worker keeps serving."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out | BaseException]], *,
                 max_batch: int = 8, max_wait_s: float = 0.005, name: str = "vista-batcher") -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if max_wait_s < 0:
            raise ValueError("max_wait_s must not be negative")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.stats = BatchStats()
        self._queue: list[_Pending[Item]] = []
        self._cond = threading.Condition()
        self._name = name
        self._worker: threading.Thread | None = None

    def submit(self, item: Item) -> Out:
        """Run ``item`` in the next batch and return its output (blocks until then)."""
        pending: _Pending[Item] = _Pending(item)
        with self._cond:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._worker.start()
            self._queue.append(pending)
            self._cond.notify_all()
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.value  # type: ignore[no-any-return]

    def _take(self) -> list[_Pending[Item]]:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            deadline = time.monotonic() + self.max_wait_s
            while len(self._queue) < self.max_batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch:]
            return batch

    def _work(self) -> None:
        while True:
            batch = self._take()
            self.stats.batches += 1
            self.stats.items += len(batch)
            self.stats.largest = max(self.stats.largest, len(batch))
            self.stats.sizes.append(len(batch))
            try:
                outputs = list(self._run_batch([pending.item for pending in batch]))
                if len(outputs) != len(batch):
                    raise RuntimeError(f"batch function returned {len(outputs)} outputs for {len(batch)} items")
            except BaseException as exc:  # noqa: BLE001 - goes to each caller; the worker lives on
                outputs = [exc] * len(batch)
            for pending, output in zip(batch, outputs, strict=True):
                if isinstance(output, BaseException):
                    pending.error = output
                else:
                    pending.value = output
                pending.done.set()

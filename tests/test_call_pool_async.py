"""``CallPool.run_calls_async``: the verl agent loop awaits the episode driver's calls on its own event
loop (issue 34 item 1).  The pool's worker wakes the loop when a call starts or ends; no executor thread
waits on the loop's behalf, a timeout counts from when the call starts, and a hung call is written off
and its worker replaced, as with the blocking :meth:`CallPool.wait`."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from vista_rl.rollout.calls import Call, CallKind
from vista_rl.rollout.workers import CallPool, run_detached


def call(fn: object, *args: object, timeout: float | None = 5.0) -> Call:
    return Call(CallKind.TOOL, fn, args, timeout, "tool test")  # type: ignore[arg-type]


def test_values_errors_and_a_timeout_come_back_in_order() -> None:
    pool = CallPool(2)
    gate = threading.Event()

    async def main() -> list[object]:
        outcomes = await pool.run_calls_async([call(lambda: 41 + 1), call(lambda: 1 / 0), call(gate.wait, 30, timeout=0.2)])
        return [outcomes[0].value, type(outcomes[1].error), outcomes[2].timed_out]

    try:
        assert asyncio.run(main()) == [42, ZeroDivisionError, True]
        assert pool.run(lambda: "still two workers", timeout=5).value == "still two workers"  # the hung one was replaced
    finally:
        gate.set()
        pool.close()


def test_many_samples_wait_on_one_event_loop_without_executor_threads() -> None:
    """Sixteen concurrent samples, each awaiting a slow call: only the pool's own workers run."""
    pool = CallPool(16, name="async-test")
    release = threading.Event()
    new_threads: list[set[str]] = []
    before = set(threading.enumerate())

    async def sample(index: int) -> int:
        (outcome,) = await pool.run_calls_async([call(lambda: release.wait(10) and index)])
        return int(outcome.value)

    async def main() -> list[int]:
        tasks = [asyncio.create_task(sample(index)) for index in range(16)]
        await asyncio.sleep(0.2)  # every sample now waits on its call
        new_threads.append({t.name for t in set(threading.enumerate()) - before if not t.name.startswith("async-test")})
        release.set()
        return await asyncio.gather(*tasks)

    try:
        assert asyncio.run(main()) == list(range(16))
        assert new_threads == [set()]  # no thread besides the pool's waited for the event loop
    finally:
        release.set()
        pool.close()


def test_a_timeout_counts_from_the_start_not_from_the_queue() -> None:
    """With one worker, the second call waits behind the first (0.3 s) yet is given its own 1 s."""
    pool = CallPool(1)

    async def main() -> list[bool]:
        outcomes = await pool.run_calls_async([call(time.sleep, 0.3, timeout=5.0), call(time.sleep, 0.05, timeout=1.0)])
        return [outcome.ok for outcome in outcomes]

    try:
        assert asyncio.run(main()) == [True, True]
    finally:
        pool.close()


def test_a_call_without_a_timeout_is_refused_and_a_detached_one_runs_alone() -> None:
    pool = CallPool(1)
    closed = threading.Event()
    try:
        with pytest.raises(ValueError, match="tool test: a call without a timeout is not waited on"):
            pool.run_calls([call(closed.set, timeout=None)])
        assert not closed.is_set()
        run_detached(call(closed.set, timeout=None))
        run_detached(call(lambda: 1 / 0, timeout=None))  # dropped: the episode is recorded already
        run_detached(None)
        assert closed.wait(5)
    finally:
        pool.close()

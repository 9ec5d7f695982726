"""Awaiting the episode driver's calls on asyncio: the pool's worker waking the event loop
(``CallPool.run_calls_async``, what the verl agent loop does since issue 34) against the executor hop it
replaced (an executor thread blocked in ``CallPool.wait`` per call), printed as JSON.

``--samples`` concurrent samples share one event loop, as verl's agent-loop worker runs them; each makes
``--calls`` calls one after another (an env step that sleeps ``--step-ms``).  Reported per side: wall
time per call (median and min-max over interleaved rounds, see ``_bench.interleave``) and the most
threads alive beside the pool's own workers.

Usage: ``python benchmarks/episode_calls.py [--samples 64] [--calls 8] [--step-ms 1] [--rounds 6] [--tiny]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from typing import Any

from _bench import dist_versions, interleave, machine, summarize

from vista_rl.rollout import Call, CallKind, CallPool

POOL_NAME = "bench-pool"


def step(seconds: float) -> str:
    time.sleep(seconds)
    return "ok"


def extra_threads() -> int:
    return sum(1 for thread in threading.enumerate() if not thread.name.startswith(POOL_NAME)) - 1


async def native(pool: CallPool, call: Call) -> None:
    await pool.run_calls_async([call])


async def executor_hop(pool: CallPool, call: Call) -> None:
    """The old way: a default-executor thread submits and blocks in ``wait`` for the coroutine."""
    await asyncio.get_running_loop().run_in_executor(None, pool.run_calls, [call])


def side(pool: CallPool, waiter: Any, samples: int, calls: int, step_s: float,
         peaks: list[int]) -> Any:
    call = Call(CallKind.STEP, step, (step_s,), 30.0, "env.step()")

    async def sample() -> None:
        for _ in range(calls):
            await waiter(pool, call)

    async def watch(done: asyncio.Event) -> None:
        while not done.is_set():
            peaks.append(extra_threads())
            await asyncio.sleep(0.005)

    async def main() -> None:
        done = asyncio.Event()
        watcher = asyncio.create_task(watch(done))
        await asyncio.gather(*(sample() for _ in range(samples)))
        done.set()
        await watcher

    def run(_start: int, n: int) -> list[float]:
        out = []
        for _ in range(n):
            started = time.perf_counter()
            asyncio.run(main())
            out.append((time.perf_counter() - started) / (samples * calls))
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--step-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tiny", action="store_true", help="a few samples and rounds (the smoke test)")
    args = parser.parse_args()
    if args.tiny:
        args.samples, args.calls, args.rounds = 4, 2, 2
    pool = CallPool(args.samples, name=POOL_NAME)
    step_s = args.step_ms / 1e3
    native_peaks: list[int] = []
    hop_peaks: list[int] = []
    try:
        ours, anchor = interleave(side(pool, native, args.samples, args.calls, step_s, native_peaks),
                                  side(pool, executor_hop, args.samples, args.calls, step_s, hop_peaks),
                                  rounds=args.rounds, per_round=1)
    finally:
        pool.close()
    ours_summary, anchor_summary = summarize(ours), summarize(anchor)
    print(json.dumps({
        "what": "wall time per awaited env call, samples sharing one event loop",
        "anchor": "loop.run_in_executor(None, CallPool.run_calls) per call (the verl loop before issue 34)",
        "settings": {"samples": args.samples, "calls_per_sample": args.calls, "step_ms": args.step_ms,
                     "rounds": args.rounds, "pool_workers": args.samples},
        "ours": {**ours_summary, "max_extra_threads": max(native_peaks, default=0)},
        "executor_hop": {**anchor_summary, "max_extra_threads": max(hop_peaks, default=0)},
        "ratio_hop_over_ours": (round(anchor_summary["median_ms"] / ours_summary["median_ms"], 2)
                                if ours_summary.get("median_ms") else None),
        "versions": {"ours": dist_versions("vista-rl"), "anchor": dist_versions("vista-rl")},
        "machine": machine(),
    }, indent=1))


if __name__ == "__main__":
    main()

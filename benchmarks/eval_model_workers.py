"""Eval throughput over model workers: episodes/s at 1, 2 and 4 workers, as ratios to 1 worker.

Each worker is a process with its own backend (``rollout.model_workers``, what ``vista eval
--model-workers N`` runs).  1 worker is the in-process engine ``vista eval`` uses by default.
Start-up (spawning workers, loading the model in each) is timed apart from the episodes, since a
long eval pays it once; the episodes run ``--passes`` times on the same workers and the last pass
(steady state) gives episodes/s.  The default model is a tiny random Qwen2.5-VL (``vista_rl_sdk.tiny_models``,
transformers, greedy), so model time dominates as it does at scale; ``--model scripted:oracle``
measures the framework's own overhead instead.  Speed-up needs free cores (or GPUs): on a shared
2-core machine expect none; the JSON records ``os.cpu_count()`` and the load average.

    python benchmarks/eval_model_workers.py [--episodes 32] [--workers 1 2 4] [--model transformers:DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from _bench import stamp
from rich.progress import Progress

from vista_rl.config import RunConfig
from vista_rl.rollout import RolloutEngine, episode_specs, make_backend, make_pool

ENV = "oddshape/odd-colour-v0"


def run(config: RunConfig, workers: int, passes: int) -> dict[str, Any]:
    """Start the workers, then run the episodes ``passes`` times on them; the last pass is the
    steady state (the first one also pays each worker's first-call warm-up)."""
    config = config.model_copy(deep=True)
    config.rollout.model_workers = workers
    specs = episode_specs(config.env.id, range(config.rollout.episodes), 1, config.env.config)
    started = time.perf_counter()
    if workers == 1:
        backend = make_backend(config)
        runner: Any = RolloutEngine(backend, config.rollout, seed=config.seed)
    else:
        backend, runner = None, make_pool(config)
    ready = time.perf_counter()
    seconds, failures, successes = [], 0, 0
    with runner:
        for _ in range(passes):
            begin = time.perf_counter()
            trajectories = list(runner.stream(specs))
            seconds.append(time.perf_counter() - begin)
            failures = sum(1 for t in trajectories if t.failure)
            successes = sum(1 for t in trajectories if t.success)
    if backend is not None:
        backend.close()
    return {"workers": workers, "start_s": round(ready - started, 3), "pass_s": [round(x, 3) for x in seconds],
            "episodes": len(specs), "failures": failures, "successes": successes,
            "episodes_per_s": round(len(specs) / seconds[-1], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--model", default=None, help="BACKEND:PATH (default: a cached tiny Qwen2.5-VL)")
    parser.add_argument("--device", default="cpu", help="device for the transformers backend")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--passes", type=int, default=2, help="runs of the episodes per pool; the last is reported")
    parser.add_argument("--tiny", action="store_true", help="2 episodes, 1 worker (in-process), 1 pass (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.episodes, args.workers, args.passes, args.max_tokens = 2, [1], 1, 4
    if args.model is None:
        from vista_rl_sdk.tiny_models import cached_tiny_model

        args.model = f"transformers:{cached_tiny_model()}"
    backend, _, path = args.model.partition(":")
    model: dict[str, Any] = {"backend": backend, "path": path or None}
    if backend == "transformers":
        model["config"] = {"device": args.device}
    config = RunConfig.model_validate({
        "env": {"id": ENV}, "model": model,
        "rollout": {"episodes": args.episodes, "max_turns": 1, "batch_size": args.batch_size,
                    "sampling": {"temperature": 0.0, "max_tokens": args.max_tokens}}})
    results = []
    with Progress(transient=True) as progress:
        task = progress.add_task("model workers", total=len(args.workers))
        for workers in args.workers:
            progress.update(task, description=f"{workers} worker(s)")
            results.append(run(config, workers, args.passes))
            progress.advance(task)
    base = next((r["episodes_per_s"] for r in results if r["workers"] == 1), results[0]["episodes_per_s"])
    for result in results:
        result["speedup_vs_1"] = round(result["episodes_per_s"] / base, 3) if base else None
    print(json.dumps(stamp({"benchmark": "eval_model_workers", "env": ENV, "model": args.model, "device": args.device,
                      "episodes": args.episodes, "batch_size": args.batch_size, "max_tokens": args.max_tokens, "passes": args.passes,
                      "cpu_count": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
                      "results": results}, "1 worker (the in-process engine), same run",
                     ["vista-plugin-transformers", "torch", "transformers"]), indent=2))


if __name__ == "__main__":
    main()

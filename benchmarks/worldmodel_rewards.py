"""What VAGEN's reasoning rewards cost per turn, and how the LLM judge batches.

- ``rule_judge_us``: one rule-judge call (parse the oracle's <observation> text, match, F1), median.
- ``step_ms``: a Sokoban (text) step with the oracle's response, plain and through
  ``worldmodel/state-reward-v0`` with the rule judges (both rewards scored every turn), medians.
- ``llm_batching``: N envs stepping concurrently (as the rollout engine's thread pool does), each
  turn asking an LLM judge for grounding and world modeling: judge requests, batched ``generate``
  calls and the largest batch, with the core's ``scripted`` backend as the judge model (so the
  numbers are the framework's, not a model's).

    python benchmarks/worldmodel_rewards.py [--repeats 200] [--envs 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _bench import stamp
from rich.progress import Progress

import vista_rl

SOKOBAN = {"env": "sokoban/sokoban-v0", "config": {"render_mode": "text"}}


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 4)


def rule_judge(repeats: int) -> float:
    env = vista_rl.make_env("sokoban/sokoban-v0", render_mode="text")
    env.reset(seed=0)
    response = env.oracle_response() or ""
    info = env.step(response).info
    judge = vista_rl.make_judge("worldmodel/grounding")
    text, truth = info["parsed"]["observation"], info["observation_state"]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        judge.score(text, truth)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e6, 2)


def step_times(env_id: str, config: dict[str, Any], repeats: int, progress: Progress, label: str) -> float:
    env = vista_rl.make_env(env_id, **config)
    times: list[float] = []
    seed = 0
    task = progress.add_task(label, total=repeats)
    env.reset(seed=seed)
    while len(times) < repeats:
        response = env.oracle_response()
        if response is None:
            seed += 1
            env.reset(seed=seed)
            continue
        start = time.perf_counter()
        result = env.step(response)
        times.append(time.perf_counter() - start)
        progress.advance(task)
        if result.done:
            seed += 1
            env.reset(seed=seed)
    return _median_ms(times)


def llm_batching(envs: int) -> dict[str, Any]:
    config = {**SOKOBAN, "grounding_judge": "worldmodel/grounding-llm",
              "worldmodeling_judge": "worldmodel/worldmodeling-llm",
              "judge_config": {"backend": "scripted", "backend_config": {"responses": ["YES"]},
                               "batch_wait_s": 0.05, "cache_size": 0}}
    made = [vista_rl.make_env("worldmodel/state-reward-v0", **config) for _ in range(envs)]
    for seed, env in enumerate(made):
        env.reset(seed=seed)
    service = made[0].judges["grounding"].service  # type: ignore[attr-defined]
    before = service.stats.to_dict()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=envs) as pool:
        results = list(pool.map(lambda env: env.step(env.oracle_response() or ""), made))
    wall = time.perf_counter() - start
    after = service.stats.to_dict()
    return {"envs": envs, "judge_requests": after["requests"] - before["requests"],
            "generate_calls": after["generate_calls"] - before["generate_calls"],
            "largest_batch": after["largest_batch"], "wall_s": round(wall, 4),
            "all_scored": all(r.info["state_reward"] == 1.0 for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--tiny", action="store_true", help="3 repeats, 2 envs (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.repeats, args.envs = 3, 2
    with Progress(transient=True) as progress:
        plain = step_times("sokoban/sokoban-v0", SOKOBAN["config"], args.repeats, progress, "plain step")
        wrapped = step_times("worldmodel/state-reward-v0", SOKOBAN, args.repeats, progress, "state-reward step")
    print(json.dumps(stamp({
        "rule_judge_us": rule_judge(args.repeats),
        "step_ms": {"plain": plain, "state_reward_rule": wrapped, "overhead": round(wrapped - plain, 4)},
        "llm_batching": llm_batching(args.envs),
    }, "the plain Sokoban step (no reasoning reward), same run", ["vista-plugin-worldmodel"]), indent=2))


if __name__ == "__main__":
    main()

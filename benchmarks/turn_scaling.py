"""Eval cost per env-turn as episodes grow (issues 28 and 36): is a multi-turn turn's cost flat?

Sokoban (``sokoban/sokoban-v0``, one new image per turn), the tiny random Qwen2.5-VL through the
transformers backend, 32 episodes, full history (no window), greedy, trajectories written to a run
directory as ``vista eval`` does.  For 2, 6 and 12 turns, two backends over the same model run
interleaved (A B B A ...), each repetition a full eval:

- ``full_prefill``: the behaviour before issue 36: every turn renders and tokenises the whole
  chat and prefills the whole history (``incremental_prompts=False, episode_cache_mb=0``; the
  processed-image cache of issue 28 on);
- ``episode_cache``: the defaults: each message tokenised once (``prompt_ids``) and each episode's
  KV cache kept between turns, so a turn prefills only what it adds (``episode_state``).

Prints JSON: per variant and turn count the eval cost per env-turn (median, min-max over the
repetitions), where the backend's time went (encoding = rendering, tokenising, the processor and
the cache's batch layout; model = ``model.generate``; finish = decoding and keeping the caches;
attention = the part of model time inside the attention kernel, ``scaled_dot_product_attention``),
the 12-over-2 ratio (target <= 1.5) and the same ratio with attention taken out (what grows besides
attending to the longer conversation), whether the greedy replies were identical across variants (they
must be: the caches change speed, never outputs), what the episode cache did at the largest turn
count (reused and prefilled tokens, the memory it held at most and after the run), and the
machine's load (``os.getloadavg``) before and after.

    .venv/bin/python benchmarks/turn_scaling.py [--tiny] [--repeats 3] [--episodes 32] [--turns 2,6,12]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import dist_versions, machine  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl.config import RolloutSection, SamplingSection  # noqa: E402
from vista_rl.rollout import RolloutEngine, episode_specs  # noqa: E402
from vista_rl.store import RunWriter  # noqa: E402

ENV_ID = "sokoban/sokoban-v0"
TARGET_RATIO = 1.5


class AttentionClock:
    """Seconds spent inside ``torch.nn.functional.scaled_dot_product_attention`` (the attention
    kernel transformers' ``sdpa`` layers call), so the JSON can say how much of a turn's growth is
    attention over the longer kept conversation and how much is everything else."""

    def __init__(self) -> None:
        import torch.nn.functional as functional

        self.seconds = 0.0
        self._functional = functional
        self._inner = functional.scaled_dot_product_attention

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return self._inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        functional.scaled_dot_product_attention = timed

    def close(self) -> None:
        self._functional.scaled_dot_product_attention = self._inner


def make_backends() -> dict[str, Any]:
    from vista_plugin_transformers.backend import TransformersBackend

    from vista_rl_sdk.tiny_models import cached_tiny_model

    path = str(cached_tiny_model(seed=0))
    return {"full_prefill": TransformersBackend(path=path, device="cpu", incremental_prompts=False,
                                                episode_cache_mb=0),
            "episode_cache": TransformersBackend(path=path, device="cpu")}


def one_eval(backend: Any, turns: int, episodes: int, max_tokens: int,
             clock: AttentionClock | None = None) -> dict[str, Any]:
    """One full eval; returns its wall time, env-turns, backend time split, attention time and the replies."""
    settings = RolloutSection(max_turns=turns, batch_size=episodes,
                              sampling=SamplingSection(temperature=0.0, max_tokens=max_tokens))
    before = dict(vars(backend.timings))
    cache = backend.episodes.cache
    cache.reset_peak()
    stats_before = dataclasses.asdict(cache.stats)
    replies: list[list[str]] = []
    attention_before = clock.seconds if clock is not None else 0.0
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        with RunWriter(Path(tmp) / "run", html=False) as writer, RolloutEngine(backend, settings, seed=0) as engine:
            for trajectory in engine.stream(episode_specs(ENV_ID, range(episodes)), ordered=True):
                writer.write(trajectory)
                replies.append([turn.response for turn in trajectory.turns])
            env_turns = engine.timings.env_steps
        wall = time.perf_counter() - started
    spent = {key: getattr(backend.timings, key) - before[key] for key in ("encode_s", "model_s", "finish_s")}
    spent["attention_s"] = (clock.seconds - attention_before) if clock is not None else 0.0
    after = dataclasses.asdict(cache.stats)
    episode_cache = {key: after[key] - stats_before[key] for key in
                     ("rows", "reused_rows", "full_prefill_rows", "over_budget_rows", "reused_tokens",
                      "prefilled_tokens")}
    episode_cache.update(peak_mb=round(after["peak_bytes"] / 2**20, 2), held_after_mb=round(after["bytes"] / 2**20, 2),
                         entries_after=after["entries"])
    return {"wall_s": wall, "env_turns": env_turns, **spent, "replies": replies, "episode_cache": episode_cache}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="4 episodes, 2 and 3 turns, 1 repetition")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turns", default="2,6,12")
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parser.parse_args()
    if args.tiny:
        args.repeats, args.episodes, args.turns, args.max_tokens = 1, 4, "2,3", 8
    turn_counts = [int(value) for value in args.turns.split(",")]
    vista_rl.host().load()
    load_before = [round(value, 2) for value in os.getloadavg()]
    backends = make_backends()
    clock = AttentionClock()
    for backend in backends.values():  # warm-up (first-call costs)
        one_eval(backend, 2, min(args.episodes, 4), args.max_tokens)
    samples: dict[str, dict[int, list[dict[str, Any]]]] = {name: {t: [] for t in turn_counts} for name in backends}
    identical = True
    order = list(backends)
    for repeat in range(args.repeats):
        for turns in turn_counts:
            names = order if (repeat + turns) % 2 == 0 else order[::-1]  # alternate who goes first
            runs = {name: one_eval(backends[name], turns, args.episodes, args.max_tokens, clock) for name in names}
            identical &= runs["episode_cache"]["replies"] == runs["full_prefill"]["replies"]
            for name, run in runs.items():
                run.pop("replies")
                samples[name][turns].append(run)
    result: dict[str, Any] = {
        "benchmark": "turn_scaling", "machine": machine(), "env": ENV_ID, "episodes": args.episodes,
        "repeats": args.repeats, "max_tokens": args.max_tokens, "history": "full (no window)", "sampling": "greedy",
        "versions": dist_versions("vista-rl", "vista-plugin-transformers", "transformers", "torch"),
        "greedy_replies_identical": identical, "target_ratio_12_over_2": TARGET_RATIO,
        "load_avg_before": load_before, "load_avg_after": [round(value, 2) for value in os.getloadavg()],
        "variants": {},
    }
    for name, by_turns in samples.items():
        rows: dict[str, Any] = {}
        for turns, runs in by_turns.items():
            per_turn = [1000 * run["wall_s"] / max(run["env_turns"], 1) for run in runs]
            rows[str(turns)] = {
                "env_turns": runs[0]["env_turns"],
                "ms_per_env_turn": {"median": round(statistics.median(per_turn), 3),
                                    "min": round(min(per_turn), 3), "max": round(max(per_turn), 3)},
                **{f"{key[:-2]}_ms_per_env_turn": round(statistics.median(
                    1000 * run[key] / max(run["env_turns"], 1) for run in runs), 3)
                   for key in ("encode_s", "model_s", "finish_s", "attention_s")},
            }
        low, high = str(min(turn_counts)), str(max(turn_counts))
        cost_ratio = rows[high]["ms_per_env_turn"]["median"] / rows[low]["ms_per_env_turn"]["median"]
        without = [rows[key]["ms_per_env_turn"]["median"] - rows[key]["attention_ms_per_env_turn"] for key in (high, low)]
        result["variants"][name] = {"turns": rows, f"ratio_{high}_over_{low}": round(cost_ratio, 2),
                                    f"ratio_{high}_over_{low}_without_attention": round(without[0] / without[1], 2)}
        if name == "episode_cache":
            result["variants"][name][f"episode_cache_at_{high}_turns"] = by_turns[int(high)][-1]["episode_cache"]
    clock.close()
    cache = backends["episode_cache"].image_cache
    if cache is not None:
        result["image_cache"] = {"enabled": cache.enabled, "hits": cache.hits, "misses": cache.misses}
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

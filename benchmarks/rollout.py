"""Rollout-engine overhead and memory, printed as JSON.

1. Framework overhead per env-turn at batch 64: 64 episodes x 5 turns of a 5-round odd-colour env
   (a new 168x168 image every turn), with trajectories written to a run directory (wall time ends
   when the writer has flushed every line and image).  Model time is the model's forward and
   sampling alone (the transformers backend's ``timings.model_s``: ``model.generate``); everything
   else is overhead: rendering and tokenizing chats and the image processor (the backend's
   ``encode_s``), cutting and decoding outputs (``finish_s``), context building, parsing, env steps
   on the thread pool, token views, hashing and writing images and JSONL.  Driven by the tiny random
   Qwen2.5-VL through the transformers backend when ``vista-plugin-transformers`` is installed, else
   by the scripted oracle (then the share of wall time is not meaningful: the model costs nothing).
   The env's own compute (drawing, judging) is measured alone on the same episodes as a baseline, so
   ``framework_only`` separates the framework's cost from the env's.  Targets (issue 28 item 3):
   framework < 0.5 ms per env-turn and < 1% of wall.
2. Memory: a 1,000-episode, 5-turn eval (scripted oracle, batch 64, images to disk): resident memory
   at start, middle and end stays flat, because finished trajectories go to disk and are dropped.

Usage: ``python benchmarks/rollout.py [--quick | --tiny] [--memory-episodes N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import vista_rl
from vista_rl import Env, Observation, StepResult
from vista_rl._plugins import PluginInfo
from vista_rl.config import RolloutSection, SamplingSection
from vista_rl.rollout import RolloutEngine, RolloutMetrics, episode_specs
from vista_rl.store import RunWriter

ENV_ID = "bench/odd-colour-rounds-v0"
TURNS = 5
TARGET_MS_PER_ENV_TURN = 0.5
TARGET_SHARE = 0.01


class OddColourRounds(Env):
    """``rounds`` odd-colour questions in a row, one new image per turn; success = all right."""

    def __init__(self, rounds: int = TURNS) -> None:
        self.rounds = rounds
        self.inner = vista_rl.make_env("oddshape/odd-colour-v0")
        self.seed = 0
        self.round = self.correct = 0

    def system_prompt(self) -> str:
        return self.inner.system_prompt() + f"\nThere are {self.rounds} rounds, one grid each."

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.seed, self.round, self.correct = seed or 0, 0, 0
        return self.inner.reset(seed=self.seed * 1000)

    def step(self, action: str) -> StepResult:
        result = self.inner.step(action)
        self.correct += int(bool(result.info.get("success")))
        self.round += 1
        info = dict(result.info, success=self.correct == self.round == self.rounds)
        if self.round >= self.rounds:
            return StepResult(Observation(result.observation.text), result.reward, True, False, info)
        observation, _ = self.inner.reset(seed=self.seed * 1000 + self.round)
        text = f"{result.observation.text}\nRound {self.round + 1}:\n{observation.text}"
        return StepResult(Observation(text, observation.images), result.reward, False, False, info)

    def oracle_response(self) -> str | None:
        return self.inner.oracle_response()


class BenchPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register(ENV_ID, OddColourRounds, description="benchmark env: 5 odd-colour rounds")


def rss_mb() -> float:
    """Current resident set size (Linux /proc; psutil when /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20


def env_only_seconds(seeds: range) -> float:
    """The env's own cost on the same episodes (oracle answers), sequential, no framework."""
    started = time.perf_counter()
    for seed in seeds:
        env = OddColourRounds()
        env.reset(seed=seed)
        for _ in range(TURNS):
            env.step(env.oracle_response() or "")
        env.close()
    return time.perf_counter() - started


def tiny_transformers_backend() -> tuple[Any | None, str]:
    """The tiny random Qwen2.5-VL through the transformers backend, or why not."""
    try:
        import vista_plugin_transformers  # noqa: F401

        from vista_rl_sdk.tiny_models import cached_tiny_model
    except ImportError as exc:
        return None, f"vista-plugin-transformers not importable ({exc}); fell back to the scripted oracle"
    model_dir = cached_tiny_model(seed=0)
    return vista_rl.make_model("transformers", path=str(model_dir)), f"tiny random Qwen2.5-VL at {model_dir}"


def backend_seconds(backend: Any) -> dict[str, float] | None:
    """The backend's own split of ``generate`` (transformers backend), or None (scripted)."""
    timings = getattr(backend, "timings", None)
    if timings is None or not hasattr(timings, "model_s"):
        return None
    return {key: float(getattr(timings, key)) for key in ("encode_s", "model_s", "finish_s")}


def measure_overhead(backend: Any, label: str, batch: int, max_tokens: int) -> dict[str, Any]:
    settings = RolloutSection(max_turns=TURNS, batch_size=batch,
                              sampling=SamplingSection(temperature=1.0, max_tokens=max_tokens))
    seeds = range(batch)
    before = backend_seconds(backend)
    with tempfile.TemporaryDirectory() as tmp, RunWriter(Path(tmp) / "run", html=False) as writer, \
            RolloutEngine(backend, settings, seed=0) as engine:
        started = time.perf_counter()
        token_views = 0
        for trajectory in engine.stream(episode_specs(ENV_ID, seeds)):
            token_views += trajectory.token_view is not None
            writer.write(trajectory)
        writer.flush()  # the run is done when every line and image is on disk
        wall = time.perf_counter() - started
        timings = engine.timings
    after = backend_seconds(backend)
    split = ({key: after[key] - before[key] for key in after} if before is not None and after is not None else None)
    # model time: the forward and sampling alone where the backend says so, else all of generate
    model_s = split["model_s"] if split is not None else timings.model_s
    env_turns = timings.env_steps
    non_model = wall - model_s
    env_only = env_only_seconds(seeds)
    framework = max(non_model - env_only, 0.0)
    result: dict[str, Any] = {
        "backend": label, "batch": batch, "episodes": len(seeds), "env_turns": env_turns,
        "generate_calls": timings.generate_calls, "wall_s": round(wall, 4), "model_s": round(model_s, 4),
        "model_time_is": ("model.generate (forward + sampling) only" if split is not None
                          else "all of backend.generate"),
        "overhead_s": round(non_model, 4),
        "overhead_per_env_turn_ms": round(1000 * non_model / max(env_turns, 1), 4),
        "overhead_share_of_wall": round(non_model / wall, 4),
        "env_compute_alone_s": round(env_only, 4),
        "framework_only_per_env_turn_ms": round(1000 * framework / max(env_turns, 1), 4),
        "framework_only_share_of_wall": round(framework / wall, 4),
        "trajectories_with_token_view": token_views,
    }
    if split is not None:
        result["backend_encode_per_env_turn_ms"] = round(1000 * split["encode_s"] / max(env_turns, 1), 4)
        result["backend_finish_per_env_turn_ms"] = round(1000 * split["finish_s"] / max(env_turns, 1), 4)
    return result


def measure_memory(episodes: int, batch: int) -> dict[str, Any]:
    backend = vista_rl.make_model("scripted", path="oracle")
    settings = RolloutSection(max_turns=TURNS, batch_size=batch)
    samples: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        metrics = RolloutMetrics()
        gc.collect()
        samples["start_mb"] = rss_mb()
        started = time.perf_counter()
        with RunWriter(run_dir) as writer, RolloutEngine(backend, settings) as engine:
            for index, trajectory in enumerate(engine.stream(episode_specs(ENV_ID, range(episodes)))):
                writer.write(trajectory)
                metrics.add(trajectory)
                if index + 1 == max(1, episodes // 10):
                    samples["after_10pct_mb"] = rss_mb()
                if index + 1 == episodes // 2:
                    samples["middle_mb"] = rss_mb()
            samples["end_mb"] = rss_mb()
            writer.write_metrics(metrics.summary())
        samples["after_html_mb"] = rss_mb()
        elapsed = time.perf_counter() - started
        images = list((run_dir / "images").glob("*.png"))
        disk = sum(path.stat().st_size for path in run_dir.rglob("*") if path.is_file())
    growth = samples["end_mb"] - samples.get("after_10pct_mb", samples["start_mb"])
    return {
        "episodes": episodes, "turns_per_episode": TURNS, "batch": batch, "seconds": round(elapsed, 2),
        "episodes_per_s": round(episodes / elapsed, 1), "success_rate": metrics.summary()["success_rate"]["value"],
        **{key: round(value, 1) for key, value in samples.items()},
        "growth_10pct_to_end_mb": round(growth, 1), "png_files": len(images), "run_dir_mb": round(disk / 2**20, 1),
        "flat": growth < 25.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 16 and 200 memory episodes")
    parser.add_argument("--tiny", action="store_true", help="batch 4, 8 new tokens and 40 memory episodes")
    parser.add_argument("--memory-episodes", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--scripted-only", action="store_true", help="skip the tiny transformers model")
    args = parser.parse_args()
    batch = 16 if args.quick else args.batch
    memory_episodes = 200 if args.quick else args.memory_episodes
    if args.tiny:
        batch, memory_episodes, args.max_tokens = 4, 40, 8

    vista_rl.host().load()
    vista_rl.host().register_object(BenchPlugin(), PluginInfo("bench", "vista-benchmarks", "0", __name__))
    result: dict[str, Any] = {
        "benchmark": "rollout", "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2), "batch": batch,
    }
    backend, note = (None, "skipped (--scripted-only)") if args.scripted_only else tiny_transformers_backend()
    if backend is not None:
        measure_overhead(backend, "transformers", min(batch, 4), args.max_tokens)  # warm-up
        result["overhead"] = measure_overhead(backend, "transformers (tiny random Qwen2.5-VL)", batch, args.max_tokens)
        result["overhead"]["note"] = note
        overhead = result["overhead"]
        overhead["targets"] = {"framework_ms_per_env_turn": TARGET_MS_PER_ENV_TURN, "share_of_wall": TARGET_SHARE}
        overhead["meets_targets"] = (overhead["framework_only_per_env_turn_ms"] < TARGET_MS_PER_ENV_TURN
                                     and overhead["framework_only_share_of_wall"] < TARGET_SHARE)
        backend.close()
    else:
        result["overhead_note"] = note
    scripted = measure_overhead(vista_rl.make_model("scripted", path="oracle"), "scripted oracle", batch, args.max_tokens)
    scripted["note"] = ("model time is ~0 with the scripted backend, so this is the engine + env cost per "
                        "env-turn on its own; its share of wall time is ~100% by construction")
    result["overhead_scripted"] = scripted
    result["memory"] = measure_memory(memory_episodes, batch)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

"""Rollout-engine overhead and memory, printed as JSON.

1. Framework overhead per env-turn at batch 64: 64 episodes x 5 turns of a 5-round odd-colour env
   (a new 168x168 image every turn), with trajectories written to a run directory (wall time ends
   when the writer has flushed every line and image).  Model time is the model's forward and
   sampling alone (the transformers backend's ``timings.model_s``: ``model.generate``); everything
   else is overhead: rendering and tokenizing chats and the image processor (the backend's
   ``encode_s``; since issue 36 it also lays out the episodes' kept KV caches for the call and
   computes the appended blocks' M-RoPE positions, work ``generate`` did inside model time before),
   cutting and decoding outputs and keeping the caches (``finish_s``), context building, parsing, env
   steps on the thread pool, token views, hashing and writing images and JSONL.  Driven by the tiny random
   Qwen2.5-VL through the transformers backend when ``vista-plugin-transformers`` is installed, else
   by the scripted oracle (then the share of wall time is not meaningful: the model costs nothing).
   The env's own compute (drawing, judging) is measured alone on the same episodes as a baseline, so
   ``framework_only`` separates the framework's cost from the env's.  Targets (issue 28 item 3):
   framework < 0.5 ms per env-turn and < 1% of wall.
2. Memory: a 1,000-episode, 5-turn eval (scripted oracle, batch 64, images to disk): resident memory
   at start, middle and end stays flat, because finished trajectories go to disk and are dropped.

3. Decode throughput (``--decode``; ``--decode-only`` skips 1 and 2): generated tokens/s of the
   transformers backend with a static KV cache and the compiled decode step (on CUDA; on CPU the
   static cache runs uncompiled) against the default dynamic cache, on the same random model of
   ``--shape`` (``benchmarks/_shapes.py``), the same prompts (one-turn odd-colour chats, image +
   question, ``--decode-chats`` x ``--decode-n`` rows), calls alternating.  The first call of each side
   is reported apart: the static one pays the compile, once per run.  Target (issue 25): >= 10,000
   generated tokens/s on a GPU at the qwen2.5-0.5b shape.

Usage: ``python benchmarks/rollout.py [--quick | --tiny] [--memory-episodes N]``
``[--decode | --decode-only] [--shape tiny|qwen2.5-0.5b] [--device cpu|cuda] [--precision fp32|bf16]``.
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

from _bench import summarize
from _shapes import SHAPES, make_model, parameter_count

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
TARGET_GPU_TOKENS_PER_S = 10_000  # issue 25: rollout on a GPU at the qwen2.5-0.5b shape


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


def measure_overhead(backend: Any, label: str, batch: int, max_tokens: int, image_sink: bool = True) -> dict[str, Any]:
    """``image_sink``: hand each turn's new images to the run writer before the model is called, as
    ``vista eval`` does (``False``: the writer encodes them when each trajectory is written)."""
    settings = RolloutSection(max_turns=TURNS, batch_size=batch,
                              sampling=SamplingSection(temperature=1.0, max_tokens=max_tokens))
    seeds = range(batch)
    before = backend_seconds(backend)
    images_before = image_processor_misses(backend)
    with tempfile.TemporaryDirectory() as tmp, RunWriter(Path(tmp) / "run", html=False) as writer, \
            RolloutEngine(backend, settings, seed=0) as engine:
        started = time.perf_counter()
        token_views = 0
        sink = writer.write_images if image_sink else None
        for trajectory in engine.stream(episode_specs(ENV_ID, seeds), image_sink=sink):
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
        "image_sink": image_sink,
    }
    images_after = image_processor_misses(backend)
    if images_before is not None and images_after is not None and images_after[0] > images_before[0]:
        new_images = images_after[0] - images_before[0]
        result["image_processor_new_images"] = new_images
        result["image_processor_ms_per_new_image"] = round(1000 * (images_after[1] - images_before[1]) / new_images, 4)
    if split is not None:
        result["backend_encode_per_env_turn_ms"] = round(1000 * split["encode_s"] / max(env_turns, 1), 4)
        result["backend_finish_per_env_turn_ms"] = round(1000 * split["finish_s"] / max(env_turns, 1), 4)
    return result


def image_processor_misses(backend: Any) -> tuple[int, float] | None:
    """``(images processed, seconds in the processor)`` so far by the backend's image cache, if it has one."""
    cache = getattr(backend, "image_cache", None)
    return (int(cache.misses), float(cache.miss_seconds)) if cache is not None else None


def profile_overhead(backend: Any, batch: int, max_tokens: int, top: int) -> dict[str, Any]:
    """One more batch run under cProfile (main thread): the project's ``top`` functions by own time,
    per env-turn, so the framework's cost can be read by function, not guessed.
    Its seeds follow the measured run's, so its images are new to the backend as theirs were."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    settings = RolloutSection(max_turns=TURNS, batch_size=batch,
                              sampling=SamplingSection(temperature=1.0, max_tokens=max_tokens))
    with tempfile.TemporaryDirectory() as tmp, RunWriter(Path(tmp) / "run", html=False) as writer, \
            RolloutEngine(backend, settings, seed=0) as engine:
        profiler.enable()
        for trajectory in engine.stream(episode_specs(ENV_ID, range(batch, 2 * batch)), image_sink=writer.write_images):
            writer.write(trajectory)
        writer.flush()
        profiler.disable()
        env_turns = max(engine.timings.env_steps, 1)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    # cProfile's graph is per function, not per call path (transformers' decorators wrap both the backend's
    # generate call and every forward), so it cannot split library calls between model and framework: the
    # project's own functions are listed, by own time; the backend's encode/finish split says the rest
    root = str(Path(__file__).resolve().parents[1])
    rows = sorted(((own, calls, key) for key, (calls, _, own, _, _) in stats.items()
                   if key[0].startswith(root) and "site-packages" not in key[0]), reverse=True)[:top]
    return {"note": "main thread, cProfile (adds its own overhead); the project's own functions by own time",
            "env_turns": env_turns,
            "top_own_ms_per_env_turn": [{"function": f"{Path(key[0]).name}:{key[1]}({key[2]})", "calls": calls,
                                         "ms": round(1000 * own / env_turns, 4)} for own, calls, key in rows]}


def decode_chats(count: int) -> list[Any]:
    """``count`` one-turn odd-colour chats (system prompt, image + question), distinct seeds."""
    from vista_rl import Message

    env = vista_rl.make_env("oddshape/odd-colour-v0")
    chats = []
    for seed in range(count):
        observation, _ = env.reset(seed=seed)
        chats.append([Message("system", env.system_prompt()),
                      Message("user", observation.text, list(observation.images))])
    return chats


def measure_decode(shape: str, device: str, precision: str, chats: int, n: int, max_tokens: int,
                   calls: int) -> dict[str, Any]:
    """Generated tokens/s of the transformers backend, static KV cache + compiled step against the
    dynamic cache, on one model and the same prompts, calls alternating (static, dynamic, dynamic,
    static, ...).  The first call of each is reported apart (the static one pays the compile)."""
    import torch
    from vista_plugin_transformers.backend import TransformersBackend

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = make_model(shape, Path(tmp) / "model", seed=0)
        dtype = "bfloat16" if precision == "bf16" else "float32"
        static = TransformersBackend(path=str(model_dir), device=device, dtype=dtype, static_cache="on")
        parameters = parameter_count(model_dir)
    dynamic = TransformersBackend(model=static.model, processor=static.processor, device=device, static_cache="off")
    prompts = decode_chats(chats)
    params = vista_rl.SamplingParams(temperature=1.0, max_tokens=max_tokens, n=n, seed=0)
    sides: dict[str, Any] = {"static": static, "dynamic": dynamic}
    times: dict[str, list[float]] = {"static": [], "dynamic": []}
    tokens: dict[str, list[int]] = {"static": [], "dynamic": []}
    first: dict[str, float] = {}

    steps: dict[str, int] = {"static": 0, "dynamic": 0}

    def call(side: str) -> tuple[float, list[int]]:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        out = sides[side].generate(prompts, params)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - started, [len(g.token_ids) for samples in out for g in samples]

    for side in ("static", "dynamic"):
        first[side] = round(call(side)[0], 3)
    for r in range(calls):
        for side in (("static", "dynamic") if r % 2 == 0 else ("dynamic", "static")):
            seconds, lengths = call(side)
            times[side].append(seconds)
            tokens[side].append(sum(lengths))
            steps[side] += max(lengths, default=0)
    result: dict[str, Any] = {
        "shape": shape, "parameters": parameters, "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else None,
        "weights": dtype, "rows_per_call": chats * n, "max_tokens": max_tokens, "calls_per_side": calls,
        "static_path": static.static_decode.stats.fallback_reason or "static cache"
        + (" + compiled decode step" if device.startswith("cuda") else " (no compile off CUDA)"),
    }
    for side in ("static", "dynamic"):
        total_s, total_tokens = sum(times[side]), sum(tokens[side])
        result[side] = {"first_call_s": first[side], "call": summarize(times[side]),
                        "generated_tokens": total_tokens,
                        "generated_tokens_per_s": round(total_tokens / total_s, 1) if total_s else None,
                        "ms_per_decode_step": round(1000 * total_s / max(steps[side], 1), 3)}
    if result["dynamic"]["generated_tokens_per_s"] and result["static"]["generated_tokens_per_s"]:
        result["static_over_dynamic"] = round(result["static"]["generated_tokens_per_s"]
                                              / result["dynamic"]["generated_tokens_per_s"], 2)
    result["target_tokens_per_s"] = TARGET_GPU_TOKENS_PER_S
    static.close()
    dynamic.close()
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
            for index, trajectory in enumerate(engine.stream(episode_specs(ENV_ID, range(episodes)),
                                                             image_sink=writer.write_images)):
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
    parser.add_argument("--no-image-sink", action="store_true",
                        help="the writer encodes PNGs when each trajectory is written, not as each turn's images arrive")
    parser.add_argument("--decode", action="store_true", help="also measure decode tokens/s, static vs dynamic cache")
    parser.add_argument("--decode-only", action="store_true", help="only the decode throughput")
    parser.add_argument("--shape", choices=tuple(SHAPES), default="tiny", help="model of the decode figures")
    parser.add_argument("--device", default="cpu", help="device of the decode figures (cpu, cuda)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="weights of the decode figures")
    parser.add_argument("--decode-chats", type=int, default=8)
    parser.add_argument("--decode-n", type=int, default=8, help="samples per chat")
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--decode-calls", type=int, default=4, help="timed calls per side after the first")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile one more batch and list the N costliest framework functions")
    args = parser.parse_args()
    batch = 16 if args.quick else args.batch
    memory_episodes = 200 if args.quick else args.memory_episodes
    if args.tiny:
        batch, memory_episodes, args.max_tokens = 4, 40, 8
        args.decode, args.decode_chats, args.decode_n, args.decode_tokens, args.decode_calls = True, 2, 1, 4, 1

    vista_rl.host().load()
    vista_rl.host().register_object(BenchPlugin(), PluginInfo("bench", "vista-benchmarks", "0", __name__))
    result: dict[str, Any] = {
        "benchmark": "rollout", "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2), "batch": batch,
    }
    if args.decode or args.decode_only:
        result["decode"] = measure_decode(args.shape, args.device, args.precision, args.decode_chats, args.decode_n,
                                          args.decode_tokens, args.decode_calls)
    if args.decode_only:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    backend, note = (None, "skipped (--scripted-only)") if args.scripted_only else tiny_transformers_backend()
    if backend is not None:
        measure_overhead(backend, "transformers", min(batch, 4), args.max_tokens)  # warm-up
        result["overhead"] = measure_overhead(backend, "transformers (tiny random Qwen2.5-VL)", batch, args.max_tokens,
                                              image_sink=not args.no_image_sink)
        result["overhead"]["note"] = note
        overhead = result["overhead"]
        overhead["targets"] = {"framework_ms_per_env_turn": TARGET_MS_PER_ENV_TURN, "share_of_wall": TARGET_SHARE}
        overhead["meets_targets"] = (overhead["framework_only_per_env_turn_ms"] <= TARGET_MS_PER_ENV_TURN
                                     and overhead["framework_only_share_of_wall"] <= TARGET_SHARE)
        overhead["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
        if args.profile:
            overhead["profile"] = profile_overhead(backend, batch, args.max_tokens, args.profile)
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

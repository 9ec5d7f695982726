"""Speed of the grid-game envs (Sokoban 6x6 with 1 box, FrozenLake 4x4), printed as JSON.

For each env: resets per second with distinct seeds (generation + first frame), full turns per
second (``env.step`` on a one-action response: parse, move, info with ground truth, vision frame),
and the frame alone (incremental redraw after a move, and a full redraw).  Baselines measured in the
same run: gym-sokoban (installed into a throwaway venv under /tmp, since it needs the old ``gym``;
never into the project venv) and gymnasium's FrozenLake-v1 with ``rgb_array`` rendering.

Usage: ``python benchmarks/envs.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

GYM_SOKOBAN_VENV = Path("/tmp/vista-bench-gym-sokoban")
TARGETS_MS = {"step_render_median": 0.2, "reset_median": 1.0}

_GYM_SOKOBAN_SCRIPT = r"""
import json, sys, time, statistics, warnings
warnings.filterwarnings("ignore")
import numpy as np
from gym_sokoban.envs.sokoban_env import SokobanEnv
n_resets, n_steps = int(sys.argv[1]), int(sys.argv[2])
env = SokobanEnv(dim_room=(6, 6), num_boxes=1, max_steps=100)
resets, steps, renders = [], [], []
for i in range(n_resets):
    np.random.seed(i)
    t = time.perf_counter(); env.reset(); resets.append(time.perf_counter() - t)
env.reset()
for i in range(n_steps):
    t = time.perf_counter()
    _, _, done, _ = env.step(1 + i % 4)
    env.render(mode="rgb_array")
    steps.append(time.perf_counter() - t)
    t = time.perf_counter(); env.render(mode="rgb_array"); renders.append(time.perf_counter() - t)
    if done:
        env.reset()
print(json.dumps({"reset": resets, "step_render": steps, "render": renders}))
"""


def summarize(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1e3, 4),
        "p90_ms": round(sorted(samples)[int(0.9 * (len(samples) - 1))] * 1e3, 4),
        "per_s": round(len(samples) / sum(samples), 1),
    }


def timed(fn: Callable[[int], Any], n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out


def bench_vista(env_id: str, n_resets: int, n_steps: int, **config: Any) -> dict[str, Any]:
    import vista_rl

    env = vista_rl.make_env(env_id, render_mode="vision", prompt_format="no_think", **config)
    resets = timed(lambda i: env.reset(seed=i), n_resets)
    responses = [f"<answer>{name}</answer>" for name in env.action_names]  # type: ignore[attr-defined]
    state = {"episode": 0}

    def one_turn(i: int) -> None:
        result = env.step(responses[i % len(responses)])
        if result.done:
            state["episode"] += 1
            env.reset(seed=state["episode"])

    env.reset(seed=0)
    steps = timed(one_turn, n_steps)
    env.reset(seed=0)
    incremental: list[float] = []
    full: list[float] = []
    for i in range(n_steps // 2):
        env.step(responses[i % len(responses)])
        env._dirty.update(range(4))  # type: ignore[attr-defined]  # a move changes 2-3 cells
        start = time.perf_counter()
        env.render_image()  # type: ignore[attr-defined]
        incremental.append(time.perf_counter() - start)
        env._frame = None  # type: ignore[attr-defined]
        start = time.perf_counter()
        env.render_image()  # type: ignore[attr-defined]
        full.append(time.perf_counter() - start)
        if env._done:  # type: ignore[attr-defined]
            env.reset(seed=i)
    image = env.render_image()  # type: ignore[attr-defined]
    return {"reset": summarize(resets), "step_render": summarize(steps), "render_incremental": summarize(incremental),
            "render_full": summarize(full), "image_size": list(image.size)}


def ensure_gym_sokoban() -> tuple[Path | None, str]:
    python = GYM_SOKOBAN_VENV / "bin" / "python"
    if python.exists():
        return python, "reused"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(GYM_SOKOBAN_VENV)], check=True, capture_output=True,
                       timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "gym-sokoban"], check=True,
                       capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        return None, f"pip install gym-sokoban failed: {(exc.stderr or '')[-400:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not build the gym-sokoban venv: {exc}"
    return python, "installed"


def bench_gym_sokoban(n_resets: int, n_steps: int) -> dict[str, Any]:
    python, how = ensure_gym_sokoban()
    if python is None:
        return {"available": False, "reason": how}
    done = subprocess.run([str(python), "-c", _GYM_SOKOBAN_SCRIPT, str(n_resets), str(n_steps)],
                          capture_output=True, text=True, timeout=1200, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if done.returncode != 0:
        return {"available": False, "reason": f"gym-sokoban failed to run: {done.stderr[-400:]}"}
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    versions = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True)
    pkgs = {p["name"].lower(): p["version"] for p in json.loads(versions.stdout or "[]")}
    return {"available": True, "venv": how, "versions": {k: pkgs.get(k) for k in ("gym", "gym-sokoban", "numpy")},
            **{key: summarize(values) for key, values in raw.items()}}


def bench_gymnasium_frozenlake(n_resets: int, n_steps: int) -> dict[str, Any]:
    import gymnasium

    env = gymnasium.make("FrozenLake-v1", render_mode="rgb_array", is_slippery=False).unwrapped

    def reset(i: int) -> None:
        env.reset(seed=i)
        env.render()

    resets = timed(reset, n_resets)
    env.reset(seed=0)

    def step(i: int) -> None:
        _, _, terminated, truncated, _ = env.step(i % 4)
        env.render()
        if terminated or truncated:
            env.reset(seed=i)

    steps = timed(step, n_steps)
    renders = timed(lambda i: env.render(), n_steps // 2)
    return {"version": gymnasium.__version__, "reset": summarize(resets), "step_render": summarize(steps),
            "render": summarize(renders)}


def ratio(baseline: dict[str, Any], ours: dict[str, Any], key: str) -> float:
    return round(baseline[key]["median_ms"] / ours[key]["median_ms"], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (smoke run)")
    args = parser.parse_args()
    n_resets, n_steps = (200, 500) if args.quick else (2000, 5000)
    warnings.filterwarnings("ignore")
    report: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpu_count": os.cpu_count()},
                              "targets_ms": TARGETS_MS}
    sokoban = bench_vista("sokoban/sokoban-v0", n_resets, n_steps, dim_room=(6, 6), num_boxes=1)
    frozenlake = bench_vista("frozenlake/frozenlake-v0", n_resets, n_steps, size=4)
    baseline_sokoban = bench_gym_sokoban(max(n_resets // 10, 50), n_steps)
    baseline_frozenlake = bench_gymnasium_frozenlake(n_resets, n_steps)
    report["sokoban_6x6_1box"] = sokoban
    report["frozenlake_4x4"] = frozenlake
    report["baseline_gym_sokoban"] = baseline_sokoban
    report["baseline_gymnasium_frozenlake"] = baseline_frozenlake
    speedups: dict[str, Any] = {}
    if baseline_sokoban.get("available"):
        speedups["sokoban_vs_gym_sokoban"] = {"reset": ratio(baseline_sokoban, sokoban, "reset"),
                                              "step_render": ratio(baseline_sokoban, sokoban, "step_render")}
    else:
        speedups["sokoban_vs_gym_sokoban"] = f"not measured: {baseline_sokoban.get('reason')}"
    speedups["frozenlake_vs_gymnasium"] = {"reset": ratio(baseline_frozenlake, frozenlake, "reset"),
                                           "step_render": ratio(baseline_frozenlake, frozenlake, "step_render")}
    report["speedup_median"] = speedups
    report["meets_targets"] = {
        name: {"step_render": env["step_render"]["median_ms"] < TARGETS_MS["step_render_median"],
               "reset": env["reset"]["median_ms"] < TARGETS_MS["reset_median"]}
        for name, env in (("sokoban", sokoban), ("frozenlake", frozenlake))
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

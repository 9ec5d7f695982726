"""SVG reconstruction env: speed of the renderer and how well the reward separates answers, as JSON.

Speed: ``env.reset`` (target render, cached per process after the first time) and ``env.step`` on a
valid answer (checks, render, scores) with the long-lived renderer worker and with a child process
per render.  Reward: the mean reward of the oracle, the target minus its last shape, and an empty
canvas over seeds, with pixel/SSIM rescaled against a blank canvas (the default) and raw (VAGEN's
formula as is), so the gap the policy has to climb is visible.

Usage: ``python benchmarks/svg_env.py [--quick] [--figure out.png]`` (the figure shows target, blank,
partial and oracle renders for a few seeds).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from typing import Any

from _bench import stamp
from PIL import Image
from vista_plugin_svg.targets import synthetic_target

import vista_rl

ENV_ID = "svg/reconstruct-v0"
BLANK = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"/>'


def without_last_shape(svg: str) -> str:
    shapes = re.findall(r"<(?:rect|circle|ellipse|polygon|line) [^>]*/>", svg)
    return svg.replace(shapes[-1], "", 1) if len(shapes) > 1 else svg


def answers(seed: int, min_shapes: int, max_shapes: int) -> dict[str, str]:
    target = synthetic_target(seed, min_shapes, max_shapes).svg
    return {"oracle": target, "partial": without_last_shape(target), "blank": BLANK}


def timed(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1e3, 3),
            "p90_ms": round(sorted(samples)[int(0.9 * (len(samples) - 1))] * 1e3, 3),
            "per_s": round(len(samples) / sum(samples), 1)}


def speed(renderer: str, n: int, image_size: int, first_seed: int) -> dict[str, Any]:
    """Distinct seeds per renderer, so no reset hits the per-process target cache."""
    env = vista_rl.make_env(ENV_ID, renderer=renderer, image_size=image_size, max_turns=n + 1)
    resets, steps = [], []
    try:
        for seed in range(first_seed, first_seed + n):
            start = time.perf_counter()
            env.reset(seed=seed)
            resets.append(time.perf_counter() - start)
        env.reset(seed=first_seed)
        for seed in range(n):
            svg = answers(seed, 1, 4)["partial"]
            start = time.perf_counter()
            env.step(f"<think>x</think><answer>{svg}</answer>")
            steps.append(time.perf_counter() - start)
    finally:
        env.close()
    return {"reset_first_time": timed(resets), "step_valid_answer": timed(steps)}


def rewards(seeds: range, relative: bool, image_size: int) -> dict[str, float]:
    env = vista_rl.make_env(ENV_ID, image_size=image_size, relative_to_blank=relative, min_shapes=2, max_shapes=4)
    totals: dict[str, list[float]] = {"oracle": [], "partial": [], "blank": []}
    try:
        for seed in seeds:
            for name, svg in answers(seed, 2, 4).items():
                env.reset(seed=seed)
                totals[name].append(env.step(f"<think>x</think><answer>{svg}</answer>").reward)
    finally:
        env.close()
    return {name: round(statistics.mean(values), 4) for name, values in totals.items()}


def figure(path: str, seeds: range, image_size: int) -> None:
    env = vista_rl.make_env(ENV_ID, image_size=image_size, min_shapes=2, max_shapes=4)
    rows = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        row = [observation.images[0]]
        for name in ("blank", "partial", "oracle"):
            env.reset(seed=seed)
            svg = answers(seed, 2, 4)[name]
            row.append(env.step(f"<think>x</think><answer>{svg}</answer>").observation.images[0])
        rows.append(row)
    env.close()
    pad = 4
    sheet = Image.new("RGB", (4 * (image_size + pad) + pad, len(rows) * (image_size + pad) + pad), (120, 120, 120))
    for r, row in enumerate(rows):
        for c, image in enumerate(row):
            sheet.paste(image, (pad + c * (image_size + pad), pad + r * (image_size + pad)))
    sheet.save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few samples only")
    parser.add_argument("--tiny", action="store_true", help="2 samples (for tests)")
    parser.add_argument("--figure", help="write a contact sheet (target | blank | partial | oracle) here")
    args = parser.parse_args()
    n = 2 if args.tiny else 5 if args.quick else 30
    seeds = range(100, 100 + n)
    report: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "image_size": 128,
        "speed": {"pool": speed("pool", n, 128, 30_000), "worker": speed("worker", n, 128, 10_000),
                  "one_shot": speed("one_shot", max(3, n // 6), 128, 20_000)},
        "mean_reward": {"relative_to_blank": rewards(seeds, True, 128), "raw_vagen": rewards(seeds, False, 128)},
        "note": "format_reward 0.5 + ssim_weight 1.0 (defaults); partial = target minus its last shape",
    }
    if args.figure:
        figure(args.figure, range(4), 128)
        report["figure"] = args.figure
    report = stamp(report, "speed: a child process per render, same run; reward: VAGEN's raw formula",
                   ["vista-plugin-svg", "cairosvg"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

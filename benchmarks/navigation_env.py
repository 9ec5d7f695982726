"""Speed of the egocentric navigation env against the Sokoban env, measured in the same run, as JSON.

For each env: resets per second with distinct seeds (world generation + first frame) and full turns
per second (``env.step`` on a one-action response: parse, act, ground truth in ``info``, and the
vision frame), over a seeded random action sequence.  Navigation is measured twice: as it runs
(frames are cached per pose within an episode, so revisited views are free) and with the cache
emptied before every step (every turn renders a fresh raycast frame: the worst case).  Ratios are
navigation's rate over Sokoban's (6x6, 1 box, 96x96 frames): from the totals (``*_per_s``) and from
the medians (``*_median``, which a shared, loaded machine disturbs less).

Usage: ``python benchmarks/navigation_env.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
import warnings
from typing import Any

from _bench import stamp, timed
from _bench import summarize as _summarize


def summarize(samples: list[float]) -> dict[str, float]:
    """Median and min-max (ms), and the rate over all samples (calls per second)."""
    return {**_summarize(samples), "per_s": round(len(samples) / sum(samples), 1)}


def bench(env_id: str, n_resets: int, n_steps: int, fresh_frames: bool = False, **config: Any) -> dict[str, Any]:
    import vista_rl

    env = vista_rl.make_env(env_id, render_mode="vision", prompt_format="no_think", **config)
    resets = timed(lambda i: env.reset(seed=i), n_resets)
    names = list(env.action_names)  # type: ignore[attr-defined]
    rng = random.Random(0)
    responses = [f"<answer>{rng.choice(names)}</answer>" for _ in range(n_steps)]
    episode = {"n": 0}

    def one_turn(i: int) -> None:
        if fresh_frames:
            env._frames.clear()  # type: ignore[attr-defined]
        result = env.step(responses[i])
        if result.done:
            episode["n"] += 1
            env.reset(seed=episode["n"])

    env.reset(seed=0)
    steps = timed(one_turn, n_steps)
    observation, _ = env.reset(seed=0)
    return {"reset": summarize(resets), "step": summarize(steps), "episodes": episode["n"] + 1,
            "image_size": list(observation.images[0].size)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (smoke run)")
    parser.add_argument("--tiny", action="store_true", help="a few samples (for tests)")
    args = parser.parse_args()
    n_resets, n_steps = (3, 6) if args.tiny else (50, 300) if args.quick else (300, 2000)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    results = {
        "sokoban_6x6_1box": bench("sokoban/sokoban-v0", n_resets, n_steps, dim_room=(6, 6), num_boxes=1),
        "navigation_255px": bench("navigation/navigation-v0", n_resets, n_steps),
        "navigation_255px_uncached": bench("navigation/navigation-v0", n_resets, n_steps, fresh_frames=True),
        "navigation_small_96px_uncached": bench("navigation/navigation-small-v0", n_resets, n_steps,
                                                fresh_frames=True),
    }
    sokoban = results["sokoban_6x6_1box"]
    # per_s counts every stall of a loaded machine; the median-based rate is the steadier figure
    ratios = {name: {"step_per_s": round(value["step"]["per_s"] / sokoban["step"]["per_s"], 3),
                     "step_median": round(sokoban["step"]["median_ms"] / value["step"]["median_ms"], 3),
                     "reset_per_s": round(value["reset"]["per_s"] / sokoban["reset"]["per_s"], 3),
                     "reset_median": round(sokoban["reset"]["median_ms"] / value["reset"]["median_ms"], 3)}
              for name, value in results.items() if name.startswith("navigation")}
    report = {"machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                          "load_avg_1m": round(os.getloadavg()[0], 2)},
              "samples": {"resets": n_resets, "steps": n_steps}, **results,
              "navigation_over_sokoban": ratios, "wall_s": round(time.perf_counter() - started, 1)}
    report = stamp(report, "the Sokoban env, same run", ["vista-plugin-navigation", "vista-plugin-sokoban"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

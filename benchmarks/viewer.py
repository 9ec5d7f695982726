"""Viewer rendering: seconds and MB for ``trajectories.html`` of a large tool-using run, and for
``compare.html`` of two such runs.

The run is synthetic but written by the real ``RunWriter``: N episodes of T turns, each turn an
observation with one image, a ``<think>`` and a tool call whose result image is the next turn's
image, as the rollout engine records them.  Images are shared between episodes (16 distinct), so
the cost measured is the page's, not PNG encoding's.

    python benchmarks/viewer.py [--episodes 2000] [--turns 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _bench import stamp
from PIL import Image
from rich.progress import track

from vista_rl.store import RunWriter
from vista_rl.store.compare import write_compare
from vista_rl.store.html import write_html
from vista_rl.trajectory import ToolCallRecord, Trajectory, Turn

IMAGES = [Image.new("RGB", (64, 64), (i * 15 % 256, i * 40 % 256, 90)) for i in range(16)]


def _episode(seed: int, turns: int, skill: float) -> Trajectory:
    success = (seed * 7919 % 100) / 100 < skill
    steps = []
    for number in range(turns):
        last = number == turns - 1
        response = (f"<think>turn {number}: look at ({seed % 512}, {number * 40})</think>"
                    + ("<answer>square</answer>" if last else
                       '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [10, 10]}}</tool_call>'))
        calls = [] if last else [ToolCallRecord("crop_zoom", {"coordinate": [10, 10]}, "Zoomed view ...", 1)]
        steps.append(Turn(observation="<image>\nWhat is the small shape?", response=response,
                          images=[IMAGES[(seed + number) % len(IMAGES)]], tool_calls=calls,
                          reward=(1.0 if success else 0.0) if last else 0.0))
    return Trajectory(env_id="bench/zoom-v0", seed=seed, turns=steps, success=success,
                      metadata={"stop_reason": "done"})


def _write_run(run_dir: Path, episodes: int, turns: int, skill: float) -> None:
    with RunWriter(run_dir, html=False) as writer:
        for seed in track(range(episodes), description=f"writing {run_dir.name}", transient=True):
            writer.write(_episode(seed, turns, skill))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="4 episodes of 2 turns (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.episodes, args.turns = 4, 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_run(root / "a", args.episodes, args.turns, 0.4)
        _write_run(root / "b", args.episodes, args.turns, 0.6)
        started = time.perf_counter()
        page = write_html(root / "a", limit=args.episodes)
        html_s = time.perf_counter() - started
        started = time.perf_counter()
        result = write_compare(root / "a", root / "b", root / "compare.html")
        compare_s = time.perf_counter() - started
        print(json.dumps(stamp({
            "episodes": args.episodes, "turns_per_episode": args.turns,
            "trajectories_html_s": round(html_s, 3), "trajectories_html_mb": round(page.stat().st_size / 1e6, 2),
            "episodes_per_s": round(args.episodes / html_s, 1),
            "compare_html_s": round(compare_s, 3), "compare_html_mb": round(result.path.stat().st_size / 1e6, 2),
            "compare_tally": result.tally,
        }, "none: absolute (no other viewer of these runs)", [])))


if __name__ == "__main__":
    main()

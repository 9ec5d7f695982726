"""Tool calls per second: one in-process tool against the same tool served (Ray actor, HTTP server),
at 1, 4 and 16 concurrent episodes, printed as JSON with ratios to in-process.

Each "episode" is a thread that makes ``--calls`` tool calls one after another, as the rollout
engine's thread pool does (one call per live episode at a time).  The in-process tool is shared by
all episodes, as :class:`~vista_rl.rollout.RolloutEngine` shares its tool cache.  The default tool
is the grounding detector (``detection/grounding-dino``) on a tiny random GroundingDINO made offline,
which batches concurrent calls into one forward pass wherever it lives; ``--tool mark`` measures
the pure transport cost with a cheap drawing tool.  Start-up (model load, actor or server start) is
reported separately and not counted in calls/s.

Usage: ``python benchmarks/tool_service.py [--tool detector|mark] [--calls 8] [--concurrency 1 4 16]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from typing import Any

from _bench import stamp
from PIL import Image

import vista_rl
from vista_rl import Tool, ToolContext


def scene() -> Image.Image:
    image = Image.new("RGB", (320, 240), (235, 235, 235))
    image.paste((200, 30, 30), (30, 40, 130, 140))
    image.paste((30, 30, 200), (170, 60, 290, 200))
    return image


def throughput(tool: Tool, arguments: dict[str, Any], episodes: int, calls: int) -> dict[str, Any]:
    context = ToolContext(images=[scene()])
    errors = [0]
    lock = threading.Lock()

    def episode() -> None:
        for _ in range(calls):
            if tool(arguments, context).error:
                with lock:
                    errors[0] += 1

    threads = [threading.Thread(target=episode) for _ in range(episodes)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    total = episodes * calls
    return {"calls": total, "seconds": round(seconds, 3), "calls_per_s": round(total / seconds, 2),
            "errors": errors[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool", choices=["detector", "mark"], default="detector")
    parser.add_argument("--calls", type=int, default=8, help="calls per episode")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--modes", nargs="+", default=["in_process", "ray", "http"])
    parser.add_argument("--tiny", action="store_true", help="the mark tool, 2 calls, in-process and HTTP (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.tool, args.calls, args.concurrency, args.modes = "mark", 2, [1, 2], ["in_process", "http"]

    workdir = tempfile.mkdtemp(prefix="vista-tool-bench-")
    if args.tool == "detector":
        from vista_plugin_detection.tiny import init_tiny_detector

        tool_id = "detection/grounding-dino"
        config: dict[str, Any] = {"model": str(init_tiny_detector(workdir, "grounding_dino")), "device": "cpu",
                                  "max_batch": 16, "max_wait_ms": 5}
        arguments: dict[str, Any] = {"caption": "red square . blue square", "box_threshold": 0.3}
    else:
        tool_id, config, arguments = "mark", {}, {"boxes": [[30, 40, 130, 140]], "image": 0}

    results: dict[str, Any] = {}
    startup: dict[str, float] = {}
    for mode in args.modes:
        started = time.perf_counter()
        if mode == "in_process":
            tool = vista_rl.make_tool(tool_id, **config)
        elif mode == "ray":
            import ray

            ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False)
            tool = vista_rl.make_tool(f"ray/{tool_id}", config=config, replicas=1)
        elif mode == "http":
            tool = vista_rl.make_tool(f"http/{tool_id}", config=config)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        warm = tool(arguments, ToolContext(images=[scene()]))  # loads the weights
        if warm.error:
            raise SystemExit(f"{mode}: warm-up call failed: {warm.text}")
        startup[mode] = round(time.perf_counter() - started, 2)
        results[mode] = {}
        for episodes in args.concurrency:
            results[mode][str(episodes)] = throughput(tool, arguments, episodes, args.calls)
            print(f"{mode} x{episodes}: {results[mode][str(episodes)]}", file=sys.stderr)
        if mode != "in_process":
            from vista_plugin_toolserve.services import close_all

            close_all()
        if mode == "ray":
            import ray

            ray.shutdown()

    ratios = {mode: {n: round(results[mode][n]["calls_per_s"] / results["in_process"][n]["calls_per_s"], 3)
                     for n in results[mode]}
              for mode in results if mode != "in_process" and "in_process" in results}
    print(json.dumps(stamp({
        "benchmark": "tool_service", "tool": tool_id, "calls_per_episode": args.calls,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "startup_s": startup, "calls_per_s": {mode: {n: r["calls_per_s"] for n, r in by.items()}
                                              for mode, by in results.items()},
        "ratio_to_in_process": ratios, "details": results,
    }, "the same tool in-process, same run", ["vista-plugin-toolserve", "vista-plugin-detection", "ray"]),
        indent=2))


if __name__ == "__main__":
    main()

"""Cost of the python tool's OS-level sandbox: per-call latency with ``isolation="namespaces"``
(bubblewrap + setpriv + seccomp + tmpfs) against the weaker ``isolation="process"`` mode.

Prints one JSON object on stdout: median and min seconds per call for a trivial program and for one
that imports numpy and PIL and saves an image, in each mode.  Usage::

    .venv/bin/python benchmarks/python_sandbox.py --repeats 10

Target: the namespaces sandbox adds < 150 ms per call over process mode (median, trivial program).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from _bench import stamp
from rich.progress import Progress

import vista_rl
from vista_rl import ToolContext

PROGRAMS = {
    "print": "print(1)",
    "numpy_pil_save": "import numpy as np\nfrom PIL import Image\n"
                      "Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save('out.png')\nprint('ok')",
}
TARGET_OVERHEAD_S = 0.150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="1 repeat (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.repeats = 1
    report: dict[str, dict[str, dict[str, float]]] = {}
    with Progress(transient=True) as progress:
        task = progress.add_task("sandbox calls", total=2 * len(PROGRAMS) * args.repeats)
        for mode in ("process", "namespaces"):
            tool = vista_rl.make_tool("python", isolation=mode)
            report[mode] = {}
            for name, code in PROGRAMS.items():
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    result = tool({"code": code}, ToolContext(images=[]))
                    times.append(time.perf_counter() - start)
                    if result.error:
                        raise SystemExit(f"{mode}/{name} failed: {result.text}")
                    progress.advance(task)
                report[mode][name] = {"median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4)}
    overhead = report["namespaces"]["print"]["median_s"] - report["process"]["print"]["median_s"]
    print(json.dumps(stamp({"benchmark": "python_sandbox", "repeats": args.repeats, "seconds": report,
                      "namespaces_overhead_s": round(overhead, 4), "target_overhead_s": TARGET_OVERHEAD_S,
                      "meets_target": overhead < TARGET_OVERHEAD_S},
                           "isolation=process (no OS sandbox), same run", ["vista-plugin-tools"]), indent=2))


if __name__ == "__main__":
    main()

"""One table for a multi-seed demo (``bash scripts/demo.sh [--tools|--grounded] --seeds 0,1,2``): a
row per seed with the rows the verdict judged (sampled success, 95% CIs), that seed's verdict, and
the count of seeds that passed.  A multi-seed verdict passes only if every seed passed (issue 38).
It also draws the seeds' curves (``vista_plugin_local.seed_curves``) into ``--plot`` (default: beside
the runs, ``FIRST_RUN-seeds.png``).

    python scripts/demo_seeds.py RUN_DIR [RUN_DIR ...] [--plot PNG]   # each holds job_summary.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from vista_plugin_local.job_rows import SUMMARY_FILE
from vista_plugin_local.seed_curves import best_row, plot_seed_curves
from vista_plugin_local.verdict import RIVAL_KINDS, seeds_verdict

#: demo.sh's last line for a main-job run: "wall time: training and its evals A s, report B s, total C s"
WALL_LINE = re.compile(r"^wall time: .*total (\d+) s$")


def cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return "(missing)"
    return f"{record['value']:.3f} [{record['ci95_low']:.3f}, {record['ci95_high']:.3f}]"


def wall_seconds(summary: dict[str, Any], run_dir: Path) -> float | None:
    """The run's wall time: its summary's ``wall_s`` (the tool and grounded harnesses time themselves),
    else the total that ``demo.sh`` logged for it (the main job's harness starts after training)."""
    wall = summary.get("wall_s")
    if isinstance(wall, (int, float)):
        return float(wall)
    log = run_dir / "demo.log"
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    found = [match for line in lines if (match := WALL_LINE.search(line))]
    return float(found[-1].group(1)) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--plot", type=Path, help="where to draw the seeds' curves (PNG)")
    args = parser.parse_args(argv)
    summaries: list[dict[str, Any]] = []
    for run_dir in args.run_dirs:
        path = run_dir / SUMMARY_FILE
        if not path.is_file():
            print(f"{run_dir}: no {SUMMARY_FILE} (the run or its harness broke); counted as failed")
            summaries.append({"seed": None, "run_dir": str(run_dir), "verdict": {"passed": False}, "judged": {}})
            continue
        summaries.append({**json.loads(path.read_text()), "run_dir": str(run_dir)})
    header = ["seed", "RL", "teacher", "best SFT", "blind", "ablation", "verdict", "wall s"]
    table = []
    for index, summary in enumerate(summaries):
        judged = summary.get("judged") or {}
        picked = {kind: best_row(judged, kind) for kind in RIVAL_KINDS}
        wall = wall_seconds(summary, Path(summary["run_dir"]))
        table.append([str(summary.get("seed", f"? ({index})")), cell(judged.get("RL")),
                      *(cell(picked[kind][1]) for kind in RIVAL_KINDS),
                      "PASS" if summary["verdict"].get("passed") else "FAIL",
                      f"{wall:.0f}" if wall is not None else "-"])
    if summaries and summaries[0].get("env"):
        print(f"\n{summaries[0].get('job', '')} job on {summaries[0]['env']}, teacher "
              f"'{summaries[0].get('teacher', '?')}': held-out sampled success per seed, 95% CIs")
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        print("  " + "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)))
    for summary in summaries:
        sft = best_row(summary.get("judged") or {}, "sft")[0].removeprefix("sft: ")
        print(f"  seed {summary.get('seed')}: best SFT row {sft}; run {summary['run_dir']}")
    combined = seeds_verdict({(s["seed"] if isinstance(s.get("seed"), int) else -1 - index): bool(
        s["verdict"].get("passed")) for index, s in enumerate(summaries)})
    print(f"{combined.passed_count}/{len(summaries)} seeds passed")
    print(combined.line())
    drawn = [(Path(s["run_dir"]), s) for s in summaries if s.get("judged")]
    picture = args.plot or args.run_dirs[0].parent / f"{args.run_dirs[0].name}-seeds.png"
    if plot_seed_curves(drawn, picture) is not None:
        print(f"curves per seed: {picture}")
    return 0 if combined.passed else 1


if __name__ == "__main__":
    sys.exit(main())

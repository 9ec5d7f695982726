"""The README's performance table, generated from the benchmarks' JSON (issue 28, item 6).

Why: a figure in the docs is only as good as the run behind it, so the docs quote only what these
scripts printed, with the date, the machine and whether it was quiet.  Reads the JSON files that
``envs.py``, ``estimators.py`` and ``train.py`` printed (saved under ``benchmarks/results/``) and
prints a markdown table: each pair's median with its min-max, the anchor's, and anchor over ours.
``--readme README.md`` rewrites the table between the ``<!-- bench:start -->`` and
``<!-- bench:end -->`` markers instead of printing it.

    python benchmarks/envs.py > benchmarks/results/envs.json   # ... estimators, train (full size, as in README)
    python benchmarks/report.py benchmarks/results/*.json --readme README.md
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
Row = tuple[str, str, dict[str, Any], str, dict[str, Any], Any]


def fmt(t: dict[str, Any] | None) -> str:
    if not t or not t.get("n"):
        return "-"
    return f"{t['median_ms']:.3g} ms ({t['min_ms']:.3g}-{t['max_ms']:.3g}, n={t['n']})"


def rows_envs(report: dict[str, Any]) -> Iterator[Row]:
    for env in ("sokoban_6x6_1box", "frozenlake_4x4"):
        for case, pair in report.get(env, {}).items():
            if isinstance(pair, dict) and "ours" in pair and "anchor_timing" in pair:
                yield (f"{env} {case}", pair["work"], pair["ours"], pair["anchor"], pair["anchor_timing"],
                       pair["anchor_over_ours"])


def rows_estimators(report: dict[str, Any]) -> Iterator[Row]:
    for key, block in report.items():
        if key.startswith("threads=") and isinstance(block, dict):
            for name, pair in block.get("vs_verl", {}).items():
                if "verl" in pair:
                    yield (f"estimator {name.replace('_vs_verl_', ' vs verl ')}, {key}",
                           f"{report['shape']['rows']}x{report['shape']['tokens']} tokens", pair["ours"],
                           "verl", pair["verl"], pair["verl_over_ours"])


def rows_train(report: dict[str, Any]) -> Iterator[Row]:
    trl = report.get("trl", {})
    if trl.get("status") == "ok":
        setting = "grad. checkpointing" if trl.get("best_setting") == "trl_gc_on" else "no grad. checkpointing"
        yield ("GRPO step", f"{report['seeds_per_step']} seeds x {report['group_size']}, tiny Qwen2.5-VL, CPU",
               report["vista"]["step"], f"TRL GRPOTrainer ({setting})", trl["step"],
               report.get("trl_step_over_vista_step"))


READERS = {"envs": rows_envs, "estimators": rows_estimators, "grpo_step": rows_train}


def table(reports: list[dict[str, Any]]) -> str:
    lines = ["| work | what | VISTA median (min-max) | anchor | anchor median (min-max) | anchor / VISTA |",
             "|---|---|---|---|---|---|"]
    runs = []
    skipped = []
    for report in reports:
        reader = READERS.get(report.get("benchmark", ""))
        if reader is None:
            continue
        m = report.get("machine", {})
        quiet = {True: "quiet", False: "shared machine, not quiet", None: "load unknown"}[m.get("quiet")]
        note = f" ({m['note']})" if m.get("note") else ""
        runs.append(f"`{report['benchmark']}`: {m.get('date')}, {m.get('cpu')} x{m.get('cores')}, "
                    f"load {m.get('load_1min')}, {quiet}{note}")
        anchor = report.get("anchor")
        for value in (anchor.values() if isinstance(anchor, dict) else [anchor]):
            if isinstance(value, str) and value.startswith("skipped"):
                skipped.append(f"`{report['benchmark']}`: anchor {value}")
        for work, what, ours, name, theirs, ratio in reader(report):
            lines.append(f"| {work} | {what} | {fmt(ours)} | {name} | {fmt(theirs)} | "
                         f"{'-' if ratio is None else f'{ratio}x'} |")
    out = "\n".join(lines) + "\n\nRuns: " + "; ".join(runs) + ".\n"
    if skipped:
        out += "Not measured: " + "; ".join(skipped) + ".\n"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="JSON printed by the benchmarks")
    parser.add_argument("--readme", type=Path, help="rewrite the table between the markers in this file")
    parser.add_argument("--tiny", action="store_true", help="read benchmarks/results/ (for tests)")
    args = parser.parse_args()
    files = args.files or sorted((Path(__file__).parent / "results").glob("*.json"))
    reports = []
    for path in files:
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:  # one unreadable file is reported, the rest used
            print(f"skipping {path}: {exc}", file=sys.stderr)
    text = table(reports)
    if args.readme is None:
        print(json.dumps({"benchmark": "report", "files": [str(f) for f in files], "markdown": text}))
        return
    readme = args.readme.read_text()
    if START not in readme or END not in readme:
        raise SystemExit(f"{args.readme} has no {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    args.readme.write_text(f"{head}{START}\n{text}{END}{tail}")


if __name__ == "__main__":
    main()

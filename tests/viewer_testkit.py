"""Real runs for the viewer tests: ``vista eval`` in-process on ``visual_search/zoom-v0``, whose
crop_zoom tool the rollout engine runs and whose results (text and an image) come back as the next
turn.  A scripted policy zooms twice and answers "square" (right on some seeds, wrong on others),
with HTML and a script hidden in its ``<think>``; the oracle run zooms once and is always right."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from vista_rl.cli.main import main
from vista_rl.store import RunReader

ENV = "visual_search/zoom-v0"
INJECTED = "<b>bold</b><script>window.__pwned = 1</script>"
SCRIPTED = [
    f"<think>Look closer at {INJECTED} (256, 256).</think>"
    '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [256, 256], "offset": 24}}</tool_call>',
    "<think>Zoom again near (100, 100).</think>"
    '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [100, 100], "offset": 40}}</tool_call>',
    "<think>It is a square.</think><answer>square</answer>",
]


def vista(*args: str) -> None:
    """The real CLI in this process; a non-zero exit fails the calling test."""
    try:
        main(list(args))
    except SystemExit as exc:
        if exc.code:
            raise AssertionError(f"vista {' '.join(args)} exited with {exc.code}") from None


def scripted_run(out: Path, episodes: int = 6, *extra: str) -> Path:
    """Three turns per episode (zoom, zoom, answer); batch size 1 keeps the script in step."""
    responses = out.parent / f"{out.name}-responses.json"
    responses.write_text(json.dumps(SCRIPTED), encoding="utf-8")
    vista("eval", "--env", ENV, "--model", f"scripted:{responses}", "--episodes", str(episodes),
          "--batch-size", "1", "--out", str(out), *extra)
    return out


def oracle_run(out: Path, episodes: int = 6) -> Path:
    vista("eval", "--env", ENV, "--model", "scripted:oracle", "--episodes", str(episodes), "--out", str(out))
    return out


def records(run_dir: Path) -> list[dict[str, Any]]:
    return list(RunReader(run_dir).records())


def status(record: dict[str, Any]) -> str:
    if record.get("failure"):
        return "error"
    return "success" if record.get("success") else "failed"


def expected_tally(records_a: list[dict[str, Any]], records_b: list[dict[str, Any]]) -> dict[str, int]:
    """Per-seed wins of A over B, worked out here from the raw records: success rate first, then
    mean reward."""
    def per_seed(rows: list[dict[str, Any]]) -> dict[Any, tuple[float, float]]:
        groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[row["seed"]].append(row)
        return {seed: (sum(bool(r["success"]) for r in group) / len(group),
                       sum(r["total_reward"] for r in group) / len(group)) for seed, group in groups.items()}

    a, b = per_seed(records_a), per_seed(records_b)
    tally = {"win": 0, "loss": 0, "tie": 0}
    for seed in set(a) & set(b):
        if a[seed] == b[seed] or (a[seed][0] == b[seed][0] and abs(a[seed][1] - b[seed][1]) < 1e-9):
            tally["tie"] += 1
        else:
            tally["win" if a[seed] > b[seed] else "loss"] += 1
    return tally

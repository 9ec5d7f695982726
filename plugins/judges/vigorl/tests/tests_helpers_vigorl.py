"""Helpers shared by the CLI tests: run the real ``vista`` entry point, write colour-grid tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vista_plugin_vigorl.mcts.toy import QUESTION, colour_grid

from vista_rl.cli import main


def run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def write_tasks(folder: Path, count: int) -> Path:
    (folder / "img").mkdir(parents=True)
    lines = []
    for seed in range(count):
        image, answer, _ = colour_grid(seed)
        image.save(folder / "img" / f"{seed}.png")
        lines.append(json.dumps({"id": f"grid-{seed}", "dataset": "colour-grid", "images": [f"img/{seed}.png"],
                                 "question": QUESTION, "answer": answer}))
    lines.insert(2, '{"id": "broken", "question": 5}')  # a bad record is reported and skipped
    path = folder / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]



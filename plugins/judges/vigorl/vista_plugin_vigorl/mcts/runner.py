"""Many searches in parallel, one JSONL row per finished tree, resumable after a crash.

Rows are appended (and fsynced) as each search finishes, so a crash loses only the searches in
flight.  On restart, rows already written are skipped; a torn last line (the crash hit mid-write) is
cut off first.  A search that fails (teacher or image error) is written as a row with ``error`` set
and is retried by the next run; the rest go on.

Each worker thread has its own teacher and judge (made by the factories), so backends need not be
thread-safe: for a remote server they are cheap clients, for a local model use one worker.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import ValidationError
from vista_plugin_vigorl.mcts.search import MctsSettings, Problem, ThoughtSearch

from vista_rl import Judge, ModelBackend, TaskRecord


@dataclass
class SearchSummary:
    tasks: int = 0
    skipped_done: int = 0
    searched: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    with_correct: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "skipped_done": self.skipped_done, "searched": self.searched,
                "failed": len(self.failed), "bad_lines": len(self.bad_lines),
                "root_value_positive": self.with_correct, "seconds": round(self.seconds, 3)}


def load_tasks(path: Path) -> tuple[list[TaskRecord], list[tuple[int, str]]]:
    """Task records (``vista_rl.TaskRecord`` JSON, one a line); broken lines are reported, not fatal.
    Relative image paths are resolved against the file's folder."""
    tasks: list[TaskRecord] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = TaskRecord.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            bad.append((number, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
            continue
        record.images = [str(p if Path(p).is_absolute() else (path.parent / p).resolve()) for p in record.images]
        tasks.append(record)
    return tasks, bad


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a trees file, skipping lines that are not JSON objects (a torn write)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row


def repair_tail(path: Path) -> bool:
    """Cut a torn last line (no final newline) so appends start on a fresh line; True if cut."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return False
    with path.open("r+b") as handle:
        handle.truncate(data.rfind(b"\n") + 1)
    return True


def finished_ids(path: Path) -> set[str]:
    """Ids whose latest row is a finished search (no ``error``)."""
    latest: dict[str, bool] = {}
    for row in read_rows(path):
        if "id" in row:
            latest[str(row["id"])] = not row.get("error")
    return {task_id for task_id, ok in latest.items() if ok}


def problem_for(task: TaskRecord, system_prompt: str) -> Problem:
    images = []
    for image_path in task.images:
        with Image.open(image_path) as image:
            images.append(image.convert("RGB"))
    return Problem(task.id, task.question, images, task.answer, system_prompt)


def tree_row(task: TaskRecord, system_prompt: str, settings: MctsSettings, search: ThoughtSearch) -> dict[str, Any]:
    """One finished (or failed) search, in ViGoRL's per-sample layout plus ``id``, stats, settings."""
    row: dict[str, Any] = {"id": task.id, "question": task.question, "image": list(task.images),
                           "true_answer": task.answer, "system_prompt": system_prompt,
                           "settings": settings.model_dump(), "error": None}
    try:
        result = search.search(problem_for(task, system_prompt))
    except Exception as exc:  # noqa: BLE001 - one failed search is recorded, the run goes on
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    row.update(tree=result.root.to_dict(), global_search_time=result.stats.seconds,
               root_value=result.root.value, stats=result.stats.to_dict())
    return row


def run_searches(tasks: list[TaskRecord], out: Path, make_teacher: Callable[[], ModelBackend],
                 make_judge: Callable[[], Judge], settings: MctsSettings, system_prompt: str, seed: int = 0,
                 workers: int = 1, on_done: Callable[[dict[str, Any]], None] | None = None) -> SearchSummary:
    """Search every task not already finished in ``out``, ``workers`` at a time."""
    summary = SearchSummary(tasks=len(tasks))
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    repair_tail(out)
    done = finished_ids(out)
    todo = [task for task in tasks if task.id not in done]
    summary.skipped_done = len(tasks) - len(todo)
    local = threading.local()
    write_lock = threading.Lock()

    def searcher() -> ThoughtSearch:
        if not hasattr(local, "search"):
            local.search = ThoughtSearch(make_teacher(), make_judge(), settings, seed)
        return local.search  # type: ignore[no-any-return]

    def work(task: TaskRecord) -> dict[str, Any]:
        try:
            search = searcher()
        except Exception as exc:  # noqa: BLE001 - a teacher that cannot start fails its tasks, visibly
            return {"id": task.id, "question": task.question, "image": list(task.images),
                    "true_answer": task.answer, "system_prompt": system_prompt,
                    "error": f"could not start the teacher or judge: {type(exc).__name__}: {exc}"}
        return tree_row(task, system_prompt, settings, search)

    with out.open("a", encoding="utf-8") as handle, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(work, task) for task in todo]
        for future in as_completed(futures):
            row = future.result()
            with write_lock:
                handle.write(json.dumps(row) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            if row.get("error"):
                summary.failed.append((str(row["id"]), str(row["error"])))
            else:
                summary.searched += 1
                summary.with_correct += int(float(row.get("root_value", 0.0)) > 0)
            if on_done is not None:
                on_done(row)
    summary.seconds = time.perf_counter() - started
    return summary

"""Reads a run directory written by :class:`~vista_rl.store.writer.RunWriter`.  Trajectories stream
one line at a time and images load only when asked for, so a reader of a huge run stays small."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

from vista_rl.errors import VistaError
from vista_rl.store.images import image_path
from vista_rl.store.layout import (
    CONFIG_FILE,
    IMAGES_DIR,
    SUMMARY_METRICS_FILE,
    TRAJECTORIES_FILE,
    VERSIONS_FILE,
)
from vista_rl.trajectory import Trajectory


def episode_status(record: dict[str, Any]) -> str:
    """``error`` (the episode broke: env, tool or model failure), ``success`` or ``failed``: the
    three outcomes the viewer's filters and ``vista trajectories show --only`` use."""
    if record.get("failure"):
        return "error"
    return "success" if record.get("success") else "failed"


def parse_record(line: str) -> dict[str, Any] | None:
    """One JSONL line as a record, or None when it is not a JSON object Python can hold."""
    try:
        record = json.loads(line)
        if "\\u" in line:  # escaped surrogates are the only way a lone one can be in a record
            record = without_surrogates(record)
    except (ValueError, RecursionError):  # bad JSON, a too-long integer, nesting too deep
        return None
    return record if isinstance(record, dict) else None


def without_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {scrub_text(key): without_surrogates(item) for key, item in value.items()}
    return value


def scrub_text(text: str) -> str:
    """Lone surrogates become U+FFFD; every other character (surrogate pairs joined) is kept."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class RunReader:
    """``for trajectory in RunReader(run_dir): ...``; ``reader.image(ref)`` loads one image."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / TRAJECTORIES_FILE
        if not self.path.exists():
            raise VistaError(f"{self.run_dir} is not a VISTA run directory: {TRAJECTORIES_FILE} is missing")
        self.images_dir = self.run_dir / IMAGES_DIR
        self.skipped_lines = 0

    def records(self) -> Iterator[dict[str, Any]]:
        """Raw JSON records.  A line that is not a JSON object (the tail of a crashed run, a line
        nested too deep for Python's parser, an integer beyond its digit limit, a list) is counted in
        ``skipped_lines`` and skipped; bytes that are not UTF-8 read as U+FFFD.  Lone surrogates that
        the writer escaped come back as U+FFFD too, so every string a reader gets can be printed and
        written as UTF-8."""
        self.skipped_lines = 0
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = parse_record(line)
                if record is None:
                    self.skipped_lines += 1
                else:
                    yield record

    def __iter__(self) -> Iterator[Trajectory]:
        for record in self.records():
            yield Trajectory.from_dict(record)

    def __len__(self) -> int:
        return sum(1 for _ in self.records())

    def image_path(self, ref: str) -> Path:
        return image_path(self.images_dir, ref)

    def image(self, ref: str) -> Image.Image:
        """Load one image by its content hash (fully read, file closed)."""
        path = self.image_path(ref)
        if not path.exists():
            raise VistaError(f"image {ref} is missing from {self.images_dir}")
        with Image.open(path) as image:
            image.load()
            return image.copy()

    def _json(self, name: str) -> dict[str, Any]:
        """A JSON object file of the run; ``{}`` when it is missing or unreadable (a viewer of a run
        whose metrics.json was cut or hand-edited still shows the episodes)."""
        path = self.run_dir / name
        try:
            data = json.loads(path.read_text(encoding="utf-8", errors="replace")) if path.exists() else {}
        except (OSError, ValueError, RecursionError):
            return {}
        return without_surrogates(data) if isinstance(data, dict) else {}

    def config(self) -> dict[str, Any]:
        path = self.run_dir / CONFIG_FILE
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
        return data if isinstance(data, dict) else {}

    def versions(self) -> dict[str, Any]:
        return self._json(VERSIONS_FILE)

    def metrics(self) -> dict[str, Any]:
        return self._json(SUMMARY_METRICS_FILE)

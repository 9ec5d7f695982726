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
        """Raw JSON records.  A line that does not parse (the tail of a crashed run) is counted in
        ``skipped_lines`` and skipped."""
        self.skipped_lines = 0
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    self.skipped_lines += 1
                    continue
                if isinstance(record, dict):
                    yield record
                else:
                    self.skipped_lines += 1

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
        path = self.run_dir / name
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def config(self) -> dict[str, Any]:
        path = self.run_dir / CONFIG_FILE
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
        return data if isinstance(data, dict) else {}

    def versions(self) -> dict[str, Any]:
        return self._json(VERSIONS_FILE)

    def metrics(self) -> dict[str, Any]:
        return self._json(SUMMARY_METRICS_FILE)

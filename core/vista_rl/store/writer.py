"""Writes a run directory:

    RUN_DIR/
      config.yaml          the resolved run config
      versions.json        versions of Python, core and every plugin (vista_rl.get_plugins())
      trajectories.jsonl   one trajectory per line, appended and flushed as each episode finishes
      images/<hash>.png    every distinct image once, named by content hash
      metrics.json         summary metrics with 95% CIs (written at the end)
      trajectories.html    a self-contained viewer (images referenced relatively)

A crash leaves every completed line valid: a line is written with one ``write`` call and flushed,
and images are written (atomically) before the line that names them.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel

from vista_rl._jsonable import json_default
from vista_rl._plugins import core_version, get_plugins
from vista_rl.store.images import image_hash, save_image
from vista_rl.store.layout import (
    CONFIG_FILE,
    IMAGES_DIR,
    SUMMARY_METRICS_FILE,
    TRAJECTORIES_FILE,
    VERSIONS_FILE,
)
from vista_rl.trajectory import Trajectory


def _finite(value: Any) -> Any:
    """NaN and infinities become null so every line is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def to_json_line(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, default=json_default, ensure_ascii=False, allow_nan=True)
    if "NaN" in text or "Infinity" in text:
        text = json.dumps(_finite(json.loads(text)), ensure_ascii=False)
    return text


def versions() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "vista-rl": core_version(),
        "plugins": [
            {"name": info.name, "distribution": info.distribution, "version": info.version,
             "builtin": info.builtin, "errors": list(info.errors)}
            for info in get_plugins()
        ],
    }


class RunWriter:
    """Streams trajectories of one run to disk.  Use as a context manager; :meth:`close` writes the
    HTML viewer."""

    def __init__(self, run_dir: str | Path, config: BaseModel | Mapping[str, Any] | None = None,
                 *, html: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.images_dir = self.run_dir / IMAGES_DIR
        self.images_dir.mkdir(parents=True, exist_ok=True)
        self.html = html
        self.count = 0
        self._known: set[str] = {path.stem for path in self.images_dir.glob("*.png")}
        if config is not None:
            data = config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config)
            (self.run_dir / CONFIG_FILE).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        (self.run_dir / VERSIONS_FILE).write_text(json.dumps(versions(), indent=2), encoding="utf-8")
        self._file: IO[str] | None = open(self.run_dir / TRAJECTORIES_FILE, "a", encoding="utf-8")  # noqa: SIM115

    def _save(self, image: Any) -> str:
        ref = image_hash(image)
        if ref not in self._known:
            save_image(image, self.images_dir, ref)
            self._known.add(ref)
        return ref

    def write(self, trajectory: Trajectory) -> None:
        """Save the trajectory's images, fill in their refs and append its line."""
        if self._file is None:
            raise RuntimeError("the run writer is closed")
        trajectory.initial_image_refs = [self._save(image) for image in trajectory.initial_images]
        for turn in trajectory.turns:
            turn.image_refs = [self._save(image) for image in turn.images]
        if trajectory.token_view is not None:
            trajectory.token_view.image_refs = [self._save(image) for image in trajectory.token_view.images]
        self._file.write(to_json_line(trajectory.to_dict()) + "\n")
        self._file.flush()
        self.count += 1

    def write_metrics(self, metrics: Mapping[str, Any]) -> Path:
        path = self.run_dir / SUMMARY_METRICS_FILE
        path.write_text(json.dumps(_finite(json.loads(json.dumps(metrics, default=json_default))), indent=2),
                        encoding="utf-8")
        return path

    def close(self) -> None:
        if self._file is None:
            return
        self._file.close()
        self._file = None
        if self.html:
            from vista_rl.store.html import write_html

            write_html(self.run_dir)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

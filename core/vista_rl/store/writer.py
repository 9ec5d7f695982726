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

A run directory belongs to one run.  Opening a writer on a directory that already holds
trajectories is refused (:class:`RunExistsError`), unless ``resume=True``: then a cut last line (the
episode a crash interrupted) is removed first, so the next record starts on a line of its own, and
``recorded`` lists the episodes already there so the caller can skip them.
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
from vista_rl.errors import VistaError
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
    """One strict-JSON line that any UTF-8 file takes.

    Model text may hold lone surrogates (``"Up\\ud800"`` from a tokenizer or a bad decode) that UTF-8
    cannot encode; such a line is written with ASCII escapes instead (``\\ud800``), which keeps the text
    exactly, so one odd reply is recorded rather than failing the whole run on write."""
    text = json.dumps(data, default=json_default, ensure_ascii=False, allow_nan=True)
    if "NaN" in text or "Infinity" in text:
        text = json.dumps(_finite(json.loads(text)), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(json.loads(text), ensure_ascii=True)
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


class RunExistsError(VistaError):
    """The run directory already holds trajectories of an earlier run."""


EpisodeKey = tuple[str, int | None, int]
"""(env id, seed, sample index): what identifies one episode of an eval."""


def repair_tail(path: Path) -> int:
    """Cut a partial last line (a write a crash interrupted) off ``path``; returns the bytes removed.

    Every complete line ends with a newline, so whatever follows the last newline is a fragment of
    one record: appending after it would glue the next record onto it and lose both."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        keep = size
        block = 64 * 1024
        while keep > 0:
            start = max(0, keep - block)
            handle.seek(start)
            chunk = handle.read(keep - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            keep = start
        if keep == size:
            return 0
        handle.truncate(keep)
    return size - keep


def recorded_episodes(path: Path) -> list[dict[str, Any]]:
    """The complete records of a trajectories file (lines that do not parse are skipped, as the
    reader skips them)."""
    records: list[dict[str, Any]] = []
    if not path.exists():
        return records
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def episode_key(record: Mapping[str, Any]) -> EpisodeKey:
    seed = record.get("seed")
    return (str(record.get("env_id")), seed if isinstance(seed, int) else None, int(record.get("sample_index") or 0))


class RunWriter:
    """Streams trajectories of one run to disk.  Use as a context manager; :meth:`close` writes the
    HTML viewer.

    ``resume=False`` (the default) refuses a directory that already holds trajectories, so a second
    run never mixes silently into the first.  ``resume=True`` repairs a cut last line and keeps the
    records: ``recorded`` holds their episode keys and ``existing`` the records themselves."""

    def __init__(self, run_dir: str | Path, config: BaseModel | Mapping[str, Any] | None = None,
                 *, html: bool = True, resume: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.images_dir = self.run_dir / IMAGES_DIR
        path = self.run_dir / TRAJECTORIES_FILE
        self.repaired_bytes = 0
        self.existing: list[dict[str, Any]] = []
        if resume:
            self.repaired_bytes = repair_tail(path)
            self.existing = recorded_episodes(path)
        elif path.exists() and path.stat().st_size > 0:
            raise RunExistsError(
                f"{self.run_dir} already holds trajectories of an earlier run; choose a new output "
                "directory, or resume it (vista eval --resume) to run only the episodes it is missing"
            )
        self.recorded: set[EpisodeKey] = {episode_key(record) for record in self.existing}
        self.images_dir.mkdir(parents=True, exist_ok=True)
        self.html = html
        self.count = 0
        self._known: set[str] = {path.stem for path in self.images_dir.glob("*.png")}
        if config is not None:
            data = config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config)
            (self.run_dir / CONFIG_FILE).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        (self.run_dir / VERSIONS_FILE).write_text(json.dumps(versions(), indent=2), encoding="utf-8")
        self._file: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115

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
        views = ([trajectory.token_view] if trajectory.token_view is not None else []) + trajectory.turn_views
        for view in views:
            view.image_refs = [self._save(image) for image in view.images]
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

"""Writes a run directory:

    RUN_DIR/
      config.yaml          the resolved run config
      versions.json        versions of Python, core and every plugin (vista_rl.get_plugins())
      trajectories.jsonl   one trajectory per line, appended and flushed as each episode finishes
      images/<hash>.png    every distinct image once, named by content hash
      metrics.json         summary metrics with 95% CIs (written at the end)
      trajectories.html    a self-contained viewer (images referenced relatively)

A crash leaves every completed line valid: a line is written with one unbuffered ``write`` call,
and images are written (atomically) before the line that names them.

Writing is off the rollout's critical path: :meth:`RunWriter.write` hashes the images (once per image,
see :func:`~vista_rl.store.images.image_hash`), fills in the refs and serialises the line, then hands
the new PNGs and the line to a background thread through a bounded queue (a full queue makes
``write`` wait, so memory stays bounded).  That thread writes each episode's new images, then its
line, in the order ``write`` was called.  ``flush()`` waits for the queue; ``close()`` drains it and
joins the thread.  A failed image or line write is recorded and raised (:class:`RunWriteError`) by
the next ``write``, ``flush`` or ``close``; after it no further line is written, so no line ever
names an image that is not on disk.  A process that dies loses only the episodes still queued;
a normal interpreter exit without ``close`` still drains the queue.

A run directory belongs to one run.  Opening a writer on a directory that already holds
trajectories is refused (:class:`RunExistsError`), unless ``resume=True``: then a cut last line (the
episode a crash interrupted) is removed first, so the next record starts on a line of its own, and
``recorded`` lists the episodes already there so the caller can skip them.
"""

from __future__ import annotations

import json
import math
import platform
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
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

QUEUE_EPISODES = 16
"""Episodes that may wait for the background writer before ``write`` blocks."""


def _finite(value: Any) -> Any:
    """NaN and infinities become null so every line is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def to_json_line(data: Mapping[str, Any], default: Callable[[Any], Any] = json_default) -> str:
    """One strict-JSON line that any UTF-8 file takes.

    Model text may hold lone surrogates (``"Up\\ud800"`` from a tokenizer or a bad decode) that UTF-8
    cannot encode; such a line is written with ASCII escapes instead (``\\ud800``), which keeps the text
    exactly, so one odd reply is recorded rather than failing the whole run on write."""
    text = json.dumps(data, default=default, ensure_ascii=False, allow_nan=True)
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


class RunWriteError(VistaError):
    """The background writer failed to write an image or a line (disk full, permissions...)."""


def _fields_of(value: Any, skip: tuple[str, ...] = ("images", "image_inputs")) -> dict[str, Any]:
    """One level of a dataclass as a dict (no recursion: ``json.dumps`` walks lists and dicts
    itself, and :func:`_record_default` handles nested dataclasses); in-memory fields skipped."""
    return {f.name: getattr(value, f.name) for f in fields(value) if f.name not in skip}


def _record_default(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _fields_of(value, skip=())
    return json_default(value)


def trajectory_line(trajectory: Trajectory) -> str:
    """The JSONL line of a trajectory: the same record as ``trajectory.to_dict()``, built one level
    deep and left to ``json.dumps`` to walk, instead of copying every list of token ids element by
    element first (that copy was most of the serialisation cost of a long episode).  A record the
    fast path cannot encode (a dict key that is not a string or number) goes the old way."""
    data: dict[str, Any] = {}
    for f in fields(trajectory):
        name = f.name
        if name == "initial_images":
            continue
        value = getattr(trajectory, name)
        if name == "turns":
            value = [_fields_of(turn) for turn in value]
        elif name == "token_view":
            value = None if value is None else _fields_of(value)
        elif name == "turn_views":
            value = [_fields_of(view) for view in value]
        data[name] = value
    data["total_reward"] = trajectory.total_reward
    data["num_turns"] = trajectory.num_turns
    try:
        return to_json_line(data, default=_record_default)
    except (TypeError, ValueError, RecursionError):
        return to_json_line(trajectory.to_dict())


_Job = tuple[bytes | None, dict[str, Any]]
"""One episode for the background writer: its line and the images it names that are not on disk;
a line of ``None`` carries images written ahead of their trajectory (:meth:`RunWriter.write_images`)."""


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
    records: ``recorded`` holds their episode keys and ``existing`` the records themselves.
    ``queue_episodes`` bounds the episodes waiting for the background writer."""

    def __init__(self, run_dir: str | Path, config: BaseModel | Mapping[str, Any] | None = None,
                 *, html: bool = True, resume: bool = False, queue_episodes: int = QUEUE_EPISODES) -> None:
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
        # unbuffered: each line reaches the file in one write() call, never split across flushes
        self._file: IO[bytes] | None = open(path, "ab", buffering=0)  # noqa: SIM115
        self.errors: list[str] = []
        self._raised = 0
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=max(1, queue_episodes))
        self._thread = threading.Thread(target=self._drain, name=f"vista-run-writer:{self.run_dir.name}")
        self._thread.start()

    def _refs(self, images: list[Any], new: dict[str, Any]) -> list[str]:
        refs = []
        for image in images:
            ref = image_hash(image)
            if ref not in self._known:
                self._known.add(ref)
                new[ref] = image
            refs.append(ref)
        return refs

    def write(self, trajectory: Trajectory) -> None:
        """Fill in the trajectory's image refs, serialise its line and queue it (with the images not
        yet on disk) for the background writer.  Raises :class:`RunWriteError` if an earlier
        episode failed to be written."""
        if self._file is None:
            raise RuntimeError("the run writer is closed")
        self._raise_errors()
        new: dict[str, Any] = {}
        trajectory.initial_image_refs = self._refs(trajectory.initial_images, new)
        for turn in trajectory.turns:
            turn.image_refs = self._refs(turn.images, new)
        views = ([trajectory.token_view] if trajectory.token_view is not None else []) + trajectory.turn_views
        for view in views:
            view.image_refs = self._refs(view.images, new)
        line = (trajectory_line(trajectory) + "\n").encode("utf-8")
        self._queue.put((line, new))
        self.count += 1

    def write_images(self, images: Sequence[Any]) -> None:
        """Queue ``images`` for the background writer before the trajectory that shows them is
        written.  Why: a batch's episodes tend to end together, so without this every PNG of the batch
        is encoded after its last episode, while the caller waits; queued as each turn's observations
        arrive (the rollout engine's ``image_sink``), the encoding overlaps the model's work.
        Images already on disk or queued are skipped; the trajectory's own write stays the one that
        guarantees its images (a line never goes to disk before them: one queue, one thread)."""
        if self._file is None:
            raise RuntimeError("the run writer is closed")
        self._raise_errors()
        new: dict[str, Any] = {}
        self._refs(list(images), new)
        if new:
            self._queue.put((None, new))

    def _drain(self) -> None:
        """The background writer: images first, then the line, one episode at a time.  Ends on the
        ``None`` that ``close`` queues, or when the interpreter is shutting down and the queue is empty."""
        main = threading.main_thread()
        while True:
            try:
                job = self._queue.get(timeout=0.2)
            except queue.Empty:
                if not main.is_alive():
                    return
                continue
            try:
                if job is None:
                    return
                self._write_job(job)
            finally:
                self._queue.task_done()

    def _write_job(self, job: _Job) -> None:
        line, images = job
        if self.errors or self._file is None:
            return  # after a failure no line is written: it could name an image that is missing
        for ref, image in images.items():
            try:
                save_image(image, self.images_dir, ref)
            except Exception as exc:  # noqa: BLE001 - recorded and raised on the caller's thread
                self.errors.append(f"writing image {ref}.png failed: {type(exc).__name__}: {exc}")
        if self.errors or line is None:
            return
        try:
            self._file.write(line)
        except Exception as exc:  # noqa: BLE001 - recorded and raised on the caller's thread
            self.errors.append(f"writing a trajectory line failed: {type(exc).__name__}: {exc}")

    def _raise_errors(self) -> None:
        if len(self.errors) > self._raised:
            self._raised = len(self.errors)
            raise RunWriteError(f"{self.run_dir}: " + "; ".join(self.errors)
                                + " (no later episode was written; the lines already on disk are complete)")

    def flush(self) -> None:
        """Wait until every queued episode is on disk; raises :class:`RunWriteError` on a failure."""
        if self._thread.is_alive():
            self._queue.join()
        self._raise_errors()

    def write_metrics(self, metrics: Mapping[str, Any]) -> Path:
        path = self.run_dir / SUMMARY_METRICS_FILE
        path.write_text(json.dumps(_finite(json.loads(json.dumps(metrics, default=json_default))), indent=2),
                        encoding="utf-8")
        return path

    def close(self) -> None:
        """Drain the queue, join the writer thread, close the file, write the HTML viewer; then raise
        :class:`RunWriteError` if any episode failed to be written."""
        if self._file is None:
            return
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._file.close()
        self._file = None
        if self.html:
            from vista_rl.store.html import write_html

            write_html(self.run_dir)
        self._raise_errors()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

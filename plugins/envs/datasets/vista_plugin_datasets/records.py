"""The dataset container and the generic loader.

A :class:`TaskDataset` is an immutable list of :class:`vista_rl.TaskRecord`; envs pick the record for a
seed with :meth:`TaskDataset.for_seed`, so the same seed gives the same item everywhere.  Files are
read with HF ``datasets`` (JSON lines, JSON arrays, parquet), which also handles parquet exports
whose image column holds bytes: those images are written once into ``image_cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from vista_plugin_datasets.paths import PathRefused, resolve_inside
from vista_rl import TaskRecord
from vista_rl.store import to_json_line

log = logging.getLogger(__name__)
TABLE_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class TaskDataset(Sequence[TaskRecord]):
    def __init__(self, name: str, records: Sequence[TaskRecord]) -> None:
        if not records:
            raise ValueError(f"dataset {name!r} has no records; check the paths and split")
        self.name = name
        self.records = list(records)
        #: (record id, why) of release items skipped because a path they name leaves its root
        self.refused: list[tuple[str, str]] = []

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> TaskRecord:  # type: ignore[override]
        return self.records[index]

    def __iter__(self) -> Iterator[TaskRecord]:
        return iter(self.records)

    def for_seed(self, seed: int | None) -> TaskRecord:
        return self.records[(seed or 0) % len(self.records)]

    def to_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        with path.open("w", encoding="utf-8") as handle:
            for record in self.records:
                handle.write(jsonl_line(record))
        return path

    def __repr__(self) -> str:
        return f"TaskDataset({self.name!r}, {len(self)} records)"


def take(records: Iterable[TaskRecord], name: str, limit: int | None,
         refused: list[tuple[str, str]] | None = None) -> TaskDataset:
    """The first ``limit`` records (all with ``None``); adapters yield records lazily, so a small
    ``limit`` on a large release reads no further than it needs to.  ``refused`` (from
    :func:`build_each`) travels on the dataset as ``dataset.refused`` for ``vista data convert``'s
    summary, and is logged."""
    refused = refused if refused is not None else []
    kept = list(islice(records, limit))
    if refused:
        log.warning("%s: %d record(s) refused for paths outside the release; first: %s",
                    name, len(refused), refused[0][1])
    if not kept and refused:
        raise ValueError(f"dataset {name!r}: every record was refused; first: {refused[0][1]}")
    dataset = TaskDataset(name, kept)
    dataset.refused = list(refused)
    return dataset


def jsonl_line(record: TaskRecord) -> str:
    """One JSONL line for ``record``, through the store's own :func:`vista_rl.store.to_json_line`: a
    release's JSON may carry a lone surrogate (``"\\ud800"``), which is written escaped and
    round-trips instead of failing the whole file."""
    return to_json_line(record.model_dump(mode="json")) + "\n"


def _read_json_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL/JSON/parquet file.  JSON lines are parsed as they are: each row keeps its own
    keys and types (HF ``datasets`` would unify them into one Arrow schema, fill absent keys with
    None, fail on a key whose type varies, and take seconds to start).  JSON arrays and parquet go
    through HF ``datasets`` (no network, no global cache)."""
    path = Path(path)
    kind = TABLE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: expected one of {', '.join(TABLE_SUFFIXES)}")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.suffix.lower() == ".jsonl":
        return _read_json_lines(path)
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="vista-hf-") as cache:
        loaded = datasets.load_dataset(kind, data_files=str(path), split="train", cache_dir=cache,
                                       keep_in_memory=True)
        return [dict(row) for row in loaded]


def materialize_image(value: Any, cache_dir: Path, stem: str, index: int) -> str:
    """An image cell (path string or ``{"bytes": ..., "path": ...}``) as a file path."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and value.get("bytes"):
        data = bytes(value["bytes"])
        name = f"{stem}-{index}-{hashlib.sha256(data).hexdigest()[:12]}.png"
        target = cache_dir / name
        if not target.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return str(target)
    if isinstance(value, Mapping) and value.get("path"):
        return str(value["path"])
    raise ValueError(f"cannot read an image from a cell of type {type(value).__name__}")


def confined_image_path(cell: Any, roots: list[Path], cache: Path, stem: str, index: int, record_id: str,
                        absolute: bool = False) -> str:
    """One image cell as a path confined to the declared roots: bytes become a file in ``cache``;
    a relative path resolves inside the first root; an absolute one must already lie in a root,
    unless ``absolute`` says the file is the operator's own (then it is kept as written)."""
    if isinstance(cell, Mapping) and cell.get("bytes"):
        return materialize_image(cell, cache, stem, index)
    text = materialize_image(cell, cache, stem, index)
    if Path(text).is_absolute():
        real = Path(text).resolve()
        if absolute or any(real.is_relative_to(root.resolve()) for root in roots):
            return text
        raise PathRefused(record_id, text, " or ".join(map(str, roots)),
                          "is absolute and outside the image root (a records file of your own may name "
                          "absolute paths: give it as records_path, or pass absolute_images=True)")
    return str(resolve_inside(roots[0], text, record_id))


def load_records(path: str | Sequence[str], columns: Mapping[str, str] | None = None,
                 image_root: str | Sequence[str] | None = None, image_cache_dir: str | None = None,
                 dataset: str | None = None, limit: int | None = None,
                 absolute_images: bool = False) -> TaskDataset:
    """Read TaskRecords.  ``columns`` maps TaskRecord fields to the file's column names (e.g.
    ``{"question": "query", "answer": "label", "images": "image"}``); unmapped extra columns go to
    ``metadata``.  Image paths are data: relative ones resolve inside ``image_root`` (default: the
    file's folder; a list names several roots, the first for relative paths), absolute ones must lie
    inside a root, and a row naming any other path is refused (counted on ``dataset.refused``).

    ``absolute_images=True`` is for the operator's own file (a run config's ``records_path``, which
    only the operator sets): its absolute image paths are kept as written, so the output of
    ``vista data convert --images reference`` evaluates.  A release read by ``vista data convert``
    keeps the default, since whoever published it must not make us read host files; relative paths
    are confined either way."""
    paths = [Path(path)] if isinstance(path, str) else [Path(p) for p in path]
    mapping = dict(columns or {})
    fields = set(TaskRecord.model_fields)
    records: list[TaskRecord] = []
    refused: list[tuple[str, str]] = []
    for file in paths:
        declared = [image_root] if isinstance(image_root, str) else list(image_root or [])
        roots = [Path(root) for root in declared] or [file.parent]
        cache = Path(image_cache_dir) if image_cache_dir else file.parent / ".vista-images"
        for row_number, row in enumerate(read_table(file)):
            data: dict[str, Any] = {}
            used = set()
            for field_name in fields:
                column = mapping.get(field_name, field_name)
                if column in row:
                    data[field_name] = row[column]
                    used.add(column)
            data.setdefault("id", f"{file.stem}-{row_number}")
            data["id"] = str(data["id"])
            images = data.get("images") or []
            if not isinstance(images, list):
                images = [images]
            try:
                data["images"] = [confined_image_path(cell, roots + [cache], cache, file.stem, row_number * 16 + k,
                                                      data["id"], absolute_images) for k, cell in enumerate(images)]
            except PathRefused as exc:
                refused.append((exc.record_id, str(exc)))
                continue
            data.setdefault("dataset", dataset or file.stem)
            metadata = dict(data.get("metadata") or {})
            metadata.update({k: v for k, v in row.items() if k not in used and _jsonable(v)})
            data["metadata"] = metadata
            if data.get("choices") is None:
                data.pop("choices", None)
            records.append(TaskRecord(**data))
            if limit is not None and len(records) >= limit:
                break
    return take(records, dataset or paths[0].stem, None, refused)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False

"""Record adapter for the ``starvector/svg-icons-simple`` release format.

The dataset (StarVector, arXiv 2312.11556) publishes parquet splits (train/val/test) with two
columns: ``Filename`` (a unique id) and ``Svg`` (the SVG code).  This adapter reads a parquet file,
a folder of them, or JSON/JSONL files with the same two keys (how a small local fixture or an
export looks), and yields :class:`.targets.SvgTarget` for the env or :class:`vista_rl.TaskRecord`
for the dataset registry.  Nothing is downloaded: point it at files you have.

Icons often start with an XML declaration, comments and a DOCTYPE; only the ``<svg>...</svg>``
element is kept, so the same static checks that guard model output accept the target.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vista_plugin_svg.safety import extract_svg
from vista_plugin_svg.targets import SvgTarget
from vista_rl import TaskRecord

ID_COLUMN, SVG_COLUMN = "Filename", "Svg"
TASK_QUESTION = "Write SVG code that reproduces the target image."


def _files(path: Path, split: str | None) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist; point records_path at svg-icons-simple files")
    patterns = ("*.parquet", "*.jsonl", "*.json")
    found = sorted(p for pattern in patterns for p in path.rglob(pattern))
    if split is not None:
        found = [p for p in found if split in p.name or split in p.parent.name]
    if not found:
        raise FileNotFoundError(f"no parquet/json/jsonl files under {path}" + (f" for split {split!r}" if split else ""))
    return found


def _rows(file: Path) -> list[dict[str, Any]]:
    if file.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq  # noqa: PLC0415 - only parquet needs it
        except ImportError as exc:
            raise ImportError("reading parquet needs pyarrow: pip install 'vista-plugin-svg[parquet]'") from exc
        return pq.read_table(file, columns=[ID_COLUMN, SVG_COLUMN]).to_pylist()
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def load_svg_icon_targets(path: str | Path, split: str | None = None, limit: int | None = None) -> list[SvgTarget]:
    """Targets from svg-icons-simple files at ``path`` (file or folder; ``split`` filters file names)."""
    targets: list[SvgTarget] = []
    for file in _files(Path(path), split):
        for index, row in enumerate(_rows(file)):
            if SVG_COLUMN not in row:
                raise KeyError(f"{file} row {index} has no {SVG_COLUMN!r} column (keys: {sorted(row)[:8]})")
            svg = extract_svg(str(row[SVG_COLUMN]))
            if svg is None:
                continue  # a row without an <svg> element cannot be a target
            name = str(row.get(ID_COLUMN) or f"{file.stem}-{index}")
            targets.append(SvgTarget(name, svg, "svg-icons-simple", {"file": file.name, "row": index}))
            if limit is not None and len(targets) >= limit:
                return targets
    if not targets:
        raise ValueError(f"no SVG rows found at {path}")
    return targets


def load_svg_icons(path: str, split: str | None = None, limit: int | None = None) -> list[TaskRecord]:
    """svg-icons-simple as :class:`vista_rl.TaskRecord` (``answer`` is the SVG code; no image files:
    the env renders the target itself)."""
    return [TaskRecord(id=target.id, dataset="svg-icons-simple", question=TASK_QUESTION, answer=target.svg,
                       task_type="open", metadata=dict(target.metadata)) for target in
            load_svg_icon_targets(path, split, limit)]

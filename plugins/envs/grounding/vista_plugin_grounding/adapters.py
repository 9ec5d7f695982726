"""Adapters from the public release layouts of ViGoRL's benchmarks to :class:`vista_rl.TaskRecord`.

Files are read as their authors publish them (paths relative to ``root``):

- **SAT** (``array/SAT``, SAT-2 in ViGoRL): parquet (or JSON/JSONL) rows ``{image_bytes: [image, ...],
  question, answers: [option, ...], correct_answer, question_type}``; images are HF image cells
  (``{"bytes", "path"}``), written once to an image cache.  Answer = the option text (ViGoRL answers
  SAT with the exact option text).
- **BLINK** (``BLINK-Benchmark/BLINK``): one folder per subtask, ``{subtask}/{split}-*.parquet`` rows
  ``{idx, question, sub_task, image_1..image_4 (None when absent), choices, answer: "(A)", prompt}``.
- **ScreenSpot** v1/v2 (``OS-Copilot/ScreenSpot-v2``): ``screenspot_{desktop,mobile,web}_v2.json`` (v1:
  no ``_v2``) lists of ``{img_filename, bbox: [x, y, w, h], instruction, data_type, data_source}``;
  images in ``screenspotv2_image/`` (v1: ``screenspot_imgs/``).  Answer = box ``[x1, y1, x2, y2]``.
- **ScreenSpot-Pro** (``likaixin/ScreenSpot-Pro``): ``annotations/*.json`` lists of ``{id, img_filename,
  bbox: [x1, y1, x2, y2], instruction, application, platform, img_size, ui_type, group}``; images in
  ``images/``.
- **V*Bench** (``craigwu/vstar_bench``): ``direct_attributes/`` and ``relative_position/``, each image
  ``X.jpg`` beside ``X.json`` ``{target_object, bbox: [[x, y, w, h], ...], question, options}`` whose
  first option is the right one; options are rotated by a hash of the file name so the right letter
  is not always A (the original order is kept in metadata).

Every image path a release names goes through the datasets plugin's ``resolve_inside`` (image cells
holding paths through ``confined_image_path``, confined to ``root``): a row naming a path outside its release
(absolute, ``..``, a symlink leading out) is refused and counted on ``dataset.refused``; the rest load.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from PIL import Image as PILImage
from vista_plugin_datasets.common import build_each, read_json, resolve_inside, take
from vista_plugin_datasets.records import TaskDataset, confined_image_path, materialize_image, read_table

from vista_rl import TaskRecord

_LETTER = re.compile(r"^\(?([A-Za-z])\)?$")


def _image_file(cell: Any, root: Path, cache: Path, stem: str, index: int, record_id: str) -> str:
    """An image cell as a file path: HF ``datasets`` decodes ``Image`` columns of a release's parquet
    to PIL images (written once to ``cache``); ``{"bytes"}`` cells are written to ``cache`` too; a
    path (a string or a cell's ``"path"``) must lie inside ``root`` (relative ones resolve there),
    else :class:`~vista_plugin_datasets.common.PathRefused` names the record."""
    if isinstance(cell, PILImage.Image):
        buffer = io.BytesIO()
        cell.convert("RGB").save(buffer, format="PNG")
        return materialize_image({"bytes": buffer.getvalue()}, cache, stem, index)
    return confined_image_path(cell, [root], cache, stem, index, record_id)


def _table_files(root: Path, patterns: Iterable[str]) -> list[Path]:
    files = sorted({p for pattern in patterns for p in root.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no data files matching {list(patterns)} under {root}")
    return files


def load_sat(root: str, split: str = "val", image_cache_dir: str | None = None,
             limit: int | None = None) -> TaskDataset:
    """SAT rows from ``{root}/{split}*.parquet|json|jsonl`` (or ``data/{split}-*.parquet``)."""
    base = Path(root)
    cache = Path(image_cache_dir) if image_cache_dir else base / ".vista-images"
    files = _table_files(base, (f"{split}*.parquet", f"{split}*.json", f"{split}*.jsonl", f"data/{split}-*.parquet"))

    def record(item: tuple[Path, int, dict[str, Any]]) -> TaskRecord:
        file, number, row = item
        record_id = f"sat-{split}-{row.get('id', number)}"
        cells = row.get("image_bytes") or row.get("images") or []
        images = [_image_file(cell, base, cache, f"sat-{file.stem}", number * 16 + k, record_id)
                  for k, cell in enumerate(cells)]
        options = [str(o) for o in row["answers"]]
        answer = str(row["correct_answer"])
        if answer not in options:
            raise ValueError(f"{file} row {number}: correct_answer {answer!r} is not one of {options}")
        return TaskRecord(
            id=record_id, dataset="sat2", images=images, question=str(row["question"]),
            answer=answer, choices=options, task_type="multiple_choice",
            metadata={"split": split, "question_type": row.get("question_type"), "file": file.name})

    rows = ((file, number, row) for file in files for number, row in enumerate(read_table(file)))
    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), f"sat2-{split}", limit, refused)


def load_blink(root: str, split: str = "val", subtasks: list[str] | None = None,
               image_cache_dir: str | None = None, limit: int | None = None) -> TaskDataset:
    """BLINK rows of every (or the named) subtask folder; answer = the option letter."""
    base = Path(root)
    cache = Path(image_cache_dir) if image_cache_dir else base / ".vista-images"
    folders = [base / name for name in subtasks] if subtasks else sorted(p for p in base.iterdir() if p.is_dir()
                                                                         and not p.name.startswith("."))

    def record(item: tuple[Path, Path, int, dict[str, Any]]) -> TaskRecord:
        folder, file, number, row = item
        record_id = f"blink-{row.get('idx', f'{folder.name}_{number}')}"
        images = [_image_file(row[key], base, cache, f"blink-{folder.name}", number * 16 + k, record_id)
                  for k, key in enumerate(("image_1", "image_2", "image_3", "image_4")) if row.get(key)]
        match = _LETTER.match(str(row["answer"]).strip())
        if not match:
            raise ValueError(f"{file} row {number}: answer {row['answer']!r} is not an option letter like (A)")
        return TaskRecord(
            id=record_id, dataset="blink", images=images,
            question=str(row["question"]), answer=match.group(1).upper(),
            choices=[str(c) for c in row["choices"]], task_type="multiple_choice",
            metadata={"split": split, "sub_task": row.get("sub_task", folder.name), "prompt": row.get("prompt")})

    rows = ((folder, file, number, row) for folder in folders
            for file in _table_files(folder, (f"{split}-*.parquet", f"{split}.parquet", f"{split}*.jsonl"))
            for number, row in enumerate(read_table(file)))
    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), f"blink-{split}", limit, refused)


def _xywh_to_xyxy(box: list[float]) -> list[float]:
    x, y, w, h = (float(v) for v in box)
    return [x, y, x + w, y + h]


def load_screenspot(root: str, platforms: list[str] | None = None, version: Literal["v1", "v2"] = "v2",
                    limit: int | None = None) -> TaskDataset:
    """ScreenSpot v1/v2: boxes are ``[x, y, w, h]`` in the release and ``[x1, y1, x2, y2]`` here."""
    base = Path(root)
    suffix, image_dir = ("_v2", "screenspotv2_image") if version == "v2" else ("", "screenspot_imgs")

    def record(item: tuple[str, int, dict[str, Any]]) -> TaskRecord:
        platform, number, row = item
        record_id = f"screenspot{suffix}-{platform}-{number}"
        return TaskRecord(
            id=record_id, dataset=f"screenspot_{version}",
            images=[str(resolve_inside(base / image_dir, row["img_filename"], record_id))],
            question=str(row["instruction"]), answer=_xywh_to_xyxy(row["bbox"]), task_type="grounding",
            metadata={"platform": platform, "data_type": row.get("data_type"),
                      "data_source": row.get("data_source"), "img_filename": row["img_filename"]})

    rows = ((platform, number, row) for platform in platforms or ["desktop", "mobile", "web"]
            for number, row in enumerate(read_json(base / f"screenspot_{platform}{suffix}.json")))
    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), f"screenspot-{version}", limit, refused)


def load_screenspot_pro(root: str, applications: list[str] | None = None, limit: int | None = None) -> TaskDataset:
    """ScreenSpot-Pro: boxes are already ``[x1, y1, x2, y2]``."""
    base = Path(root)
    files = sorted((base / "annotations").glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no annotations/*.json under {base}; is the dataset root right?")

    def record(item: tuple[Path, int, dict[str, Any]]) -> TaskRecord | None:
        file, number, row = item
        if applications and row.get("application") not in applications:
            return None
        record_id = f"screenspot-pro-{row.get('id', f'{file.stem}_{number}')}"
        return TaskRecord(
            id=record_id, dataset="screenspot_pro",
            images=[str(resolve_inside(base / "images", row["img_filename"], record_id))],
            question=str(row["instruction"]), answer=[float(v) for v in row["bbox"]], task_type="grounding",
            metadata={k: row.get(k) for k in ("application", "platform", "img_size", "ui_type", "group")}
            | {"data_type": row.get("ui_type")})

    rows = ((file, number, row) for file in files for number, row in enumerate(read_json(file)))
    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), "screenspot-pro", limit, refused)


def load_vstar(root: str, categories: list[str] | None = None, limit: int | None = None) -> TaskDataset:
    """V*Bench: the image beside each question file must stay inside the release (a symlink that leads
    out is refused for that question)."""
    base = Path(root)
    wanted = categories or ["direct_attributes", "relative_position"]
    for category in wanted:
        if not (base / category).is_dir():
            raise FileNotFoundError(f"{base / category} does not exist; is the V*Bench root right?")

    def record(item: tuple[str, Path]) -> TaskRecord:
        category, file = item
        record_id = f"vstar-{category}-{file.stem}"
        folder = resolve_inside(base, category, record_id)
        row = read_json(resolve_inside(folder, file.name, record_id))
        image = next((p for p in (file.with_suffix(s) for s in (".jpg", ".png", ".jpeg")) if p.exists()), None)
        if image is None:
            raise FileNotFoundError(f"no image beside {file}")
        options = [str(o) for o in row["options"]]
        shift = int(hashlib.sha256(file.stem.encode()).hexdigest(), 16) % len(options)
        shown = options[shift:] + options[:shift]
        return TaskRecord(
            id=record_id, dataset="vstar_bench", images=[str(resolve_inside(folder, image.name, record_id))],
            question=str(row["question"]), answer=shown.index(options[0]), choices=shown,
            task_type="multiple_choice",
            metadata={"category": category, "target_object": row.get("target_object"),
                      "target_boxes": [_xywh_to_xyxy(b) for b in row.get("bbox", [])],
                      "original_options": options})

    files = ((category, file) for category in wanted for file in sorted((base / category).glob("*.json")))
    refused: list[tuple[str, str]] = []
    return take(build_each(files, record, refused), "vstar-bench", limit, refused)

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
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from PIL import Image as PILImage
from vista_plugin_datasets.records import TaskDataset, _materialize, read_table

from vista_rl import TaskRecord

_LETTER = re.compile(r"^\(?([A-Za-z])\)?$")


def _image_file(cell: Any, cache: Path, stem: str, index: int) -> str:
    """An image cell as a file path: HF ``datasets`` decodes ``Image`` columns of a release's parquet
    to PIL images (written once to ``cache``); raw ``{"bytes", "path"}`` cells and paths go through
    the datasets plugin's reader."""
    if isinstance(cell, PILImage.Image):
        buffer = io.BytesIO()
        cell.convert("RGB").save(buffer, format="PNG")
        cell = {"bytes": buffer.getvalue()}
    return _materialize(cell, cache, stem, index)


def _read_json(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is the dataset root right?")
    return json.loads(path.read_text(encoding="utf-8"))


def _take(records: list[TaskRecord], name: str, limit: int | None) -> TaskDataset:
    return TaskDataset(name, records[:limit] if limit is not None else records)


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
    records: list[TaskRecord] = []
    for file in _table_files(base, (f"{split}*.parquet", f"{split}*.json", f"{split}*.jsonl",
                                    f"data/{split}-*.parquet")):
        for number, row in enumerate(read_table(file)):
            cells = row.get("image_bytes") or row.get("images") or []
            images = [_image_file(cell, cache, f"sat-{file.stem}", number * 16 + k) for k, cell in enumerate(cells)]
            images = [p if Path(p).is_absolute() else str(base / p) for p in images]
            options = [str(o) for o in row["answers"]]
            answer = str(row["correct_answer"])
            if answer not in options:
                raise ValueError(f"{file} row {number}: correct_answer {answer!r} is not one of {options}")
            records.append(TaskRecord(
                id=f"sat-{split}-{row.get('id', number)}", dataset="sat2", images=images, question=str(row["question"]),
                answer=answer, choices=options, task_type="multiple_choice",
                metadata={"split": split, "question_type": row.get("question_type"), "file": file.name}))
    return _take(records, f"sat2-{split}", limit)


def load_blink(root: str, split: str = "val", subtasks: list[str] | None = None,
               image_cache_dir: str | None = None, limit: int | None = None) -> TaskDataset:
    """BLINK rows of every (or the named) subtask folder; answer = the option letter."""
    base = Path(root)
    cache = Path(image_cache_dir) if image_cache_dir else base / ".vista-images"
    folders = [base / name for name in subtasks] if subtasks else sorted(p for p in base.iterdir() if p.is_dir()
                                                                         and not p.name.startswith("."))
    records: list[TaskRecord] = []
    for folder in folders:
        for file in _table_files(folder, (f"{split}-*.parquet", f"{split}.parquet", f"{split}*.jsonl")):
            for number, row in enumerate(read_table(file)):
                images = [_image_file(row[key], cache, f"blink-{folder.name}", number * 16 + k)
                          for k, key in enumerate(("image_1", "image_2", "image_3", "image_4")) if row.get(key)]
                match = _LETTER.match(str(row["answer"]).strip())
                if not match:
                    raise ValueError(f"{file} row {number}: answer {row['answer']!r} is not an option letter like (A)")
                records.append(TaskRecord(
                    id=f"blink-{row.get('idx', f'{folder.name}_{number}')}", dataset="blink", images=images,
                    question=str(row["question"]), answer=match.group(1).upper(),
                    choices=[str(c) for c in row["choices"]], task_type="multiple_choice",
                    metadata={"split": split, "sub_task": row.get("sub_task", folder.name), "prompt": row.get("prompt")}))
    return _take(records, f"blink-{split}", limit)


def _xywh_to_xyxy(box: list[float]) -> list[float]:
    x, y, w, h = (float(v) for v in box)
    return [x, y, x + w, y + h]


def load_screenspot(root: str, platforms: list[str] | None = None, version: Literal["v1", "v2"] = "v2",
                    limit: int | None = None) -> TaskDataset:
    """ScreenSpot v1/v2: boxes are ``[x, y, w, h]`` in the release and ``[x1, y1, x2, y2]`` here."""
    base = Path(root)
    suffix, image_dir = ("_v2", "screenspotv2_image") if version == "v2" else ("", "screenspot_imgs")
    records: list[TaskRecord] = []
    for platform in platforms or ["desktop", "mobile", "web"]:
        for number, row in enumerate(_read_json(base / f"screenspot_{platform}{suffix}.json")):
            records.append(TaskRecord(
                id=f"screenspot{suffix}-{platform}-{number}", dataset=f"screenspot_{version}",
                images=[str(base / image_dir / row["img_filename"])], question=str(row["instruction"]),
                answer=_xywh_to_xyxy(row["bbox"]), task_type="grounding",
                metadata={"platform": platform, "data_type": row.get("data_type"),
                          "data_source": row.get("data_source"), "img_filename": row["img_filename"]}))
    return _take(records, f"screenspot-{version}", limit)


def load_screenspot_pro(root: str, applications: list[str] | None = None, limit: int | None = None) -> TaskDataset:
    """ScreenSpot-Pro: boxes are already ``[x1, y1, x2, y2]``."""
    base = Path(root)
    files = sorted((base / "annotations").glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no annotations/*.json under {base}; is the dataset root right?")
    records: list[TaskRecord] = []
    for file in files:
        for number, row in enumerate(_read_json(file)):
            if applications and row.get("application") not in applications:
                continue
            records.append(TaskRecord(
                id=f"screenspot-pro-{row.get('id', f'{file.stem}_{number}')}", dataset="screenspot_pro",
                images=[str(base / "images" / row["img_filename"])], question=str(row["instruction"]),
                answer=[float(v) for v in row["bbox"]], task_type="grounding",
                metadata={k: row.get(k) for k in ("application", "platform", "img_size", "ui_type", "group")}
                | {"data_type": row.get("ui_type")}))
    return _take(records, "screenspot-pro", limit)


def load_vstar(root: str, categories: list[str] | None = None, limit: int | None = None) -> TaskDataset:
    base = Path(root)
    records: list[TaskRecord] = []
    for category in categories or ["direct_attributes", "relative_position"]:
        folder = base / category
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} does not exist; is the V*Bench root right?")
        for file in sorted(folder.glob("*.json")):
            row = _read_json(file)
            image = next((p for p in (file.with_suffix(s) for s in (".jpg", ".png", ".jpeg")) if p.exists()), None)
            if image is None:
                raise FileNotFoundError(f"no image beside {file}")
            options = [str(o) for o in row["options"]]
            shift = int(hashlib.sha256(file.stem.encode()).hexdigest(), 16) % len(options)
            shown = options[shift:] + options[:shift]
            records.append(TaskRecord(
                id=f"vstar-{category}-{file.stem}", dataset="vstar_bench", images=[str(image)],
                question=str(row["question"]), answer=shown.index(options[0]), choices=shown,
                task_type="multiple_choice",
                metadata={"category": category, "target_object": row.get("target_object"),
                          "target_boxes": [_xywh_to_xyxy(b) for b in row.get("bbox", [])],
                          "original_options": options}))
    return _take(records, "vstar-bench", limit)

"""CLEVR and CLEVR-Math: both are ``{"info": ..., "questions": [...]}`` files whose questions name
``image_filename`` and their ``split``; the renders live in ``CLEVR_v1.0/images/{split}/``.

- CLEVR v1.0 (Johnson et al.): ``CLEVR_v1.0/questions/CLEVR_{split}_questions.json``; answers are
  words ("yes", "cube", "large") or counts ("3"), judged by exact match (counts as numbers).
- CLEVR-Math (dali-does/clevr-math): ``clevr-math-{split}.json`` (train/val/test) with
  ``template_filename`` and an integer ``answer``; train/val use CLEVR's own images, the test split
  ships its own renders in the same ``CLEVR_v1.0/images/{split}/`` layout (``clevr_dir``).
  Answers are judged as math (integers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import build_each, number_text, read_json, resolve_inside, take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord


def _questions(path: Path, clevr_dir: Path, dataset: str, split: str, task_type: str,
               metadata_keys: tuple[str, ...], limit: int | None) -> TaskDataset:
    def record(item: tuple[int, dict[str, Any]]) -> TaskRecord | None:
        index, row = item
        if row.get("answer") is None:
            return None  # CLEVR's test questions carry no answers
        record_id = f"{dataset}-{split}-{row.get('question_index', index)}"
        folder = resolve_inside(clevr_dir / "images", str(row.get("split", split)), record_id)
        image = resolve_inside(folder, row["image_filename"], record_id)
        metadata: dict[str, Any] = {"split": split, "image_filename": row["image_filename"]}
        return TaskRecord(
            id=record_id, dataset=dataset, images=[str(image)],
            question=row["question"], answer=number_text(row["answer"]), task_type=task_type,  # type: ignore[arg-type]
            metadata=metadata | {key: row.get(key) for key in metadata_keys})

    refused: list[tuple[str, str]] = []
    return take(build_each(enumerate(read_json(path)["questions"]), record, refused), f"{dataset}-{split}", limit,
                refused)


def load_clevr(root: str, split: str = "val", limit: int | None = None) -> TaskDataset:
    """``root`` is the ``CLEVR_v1.0`` folder."""
    base = Path(root)
    return _questions(base / "questions" / f"CLEVR_{split}_questions.json", base, "clevr", split,
                      "short_answer", ("question_family_index",), limit)


def load_clevr_math(root: str, clevr_dir: str, split: str = "test", limit: int | None = None) -> TaskDataset:
    """``root`` holds ``clevr-math-{split}.json``; ``clevr_dir`` is the ``CLEVR_v1.0`` folder whose
    ``images/`` has the split's renders."""
    return _questions(Path(root) / f"clevr-math-{split}.json", Path(clevr_dir), "clevr_math", split,
                      "math", ("template_filename",), limit)

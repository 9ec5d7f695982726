"""Datasets whose answers are free text checked against what people wrote: VizWiz (ten crowd
answers, VQA accuracy), DocVQA (a few accepted answers, ANLS) and MapQA (one answer, exact).

- VizWiz VQA (vizwiz.org): ``Annotations/{split}.json``, a list of ``{image, question, answers:
  [{answer, answer_confidence}] x 10, answer_type, answerable}``; photos in ``{split}/{image}``.
- DocVQA single-page (rrc.cvc.uab.es, task 1): ``{split}_v1.0_withQT.json`` (or ``{split}_v1.0.json``)
  = ``{"dataset_name", "dataset_split", "data": [{questionId, question, question_types, image:
  "documents/xxx.png", docId, answers: [...]}]}``; ``image`` is relative to the release folder, or
  found by file name in ``image_dir`` (e.g. an unpacked ``spdocvqa_images/``).
- MapQA (OSU-slatelab/MapQA): one folder per variant (``MapQA_S``, ``MapQA_U``, ``MapQA_R``/``MapQA_V``),
  each with ``questions/{split}-QA.json`` (a list of ``{question, answer, map_id, ...}``) and the maps in
  ``images/{map_id}``.  ``answer`` is a string, a number, or a list of region names (written here as
  one comma-separated string in the release's order, with the list kept in ``metadata["answer_list"]``
  and the ``set_match`` judge, so any order of the same regions is right).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import build_each, number_text, read_json, resolve_inside, take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord


def load_vizwiz(root: str, split: str = "val", answerable_only: bool = False,
                limit: int | None = None) -> TaskDataset:
    base = Path(root)
    rows = read_json(base / "Annotations" / f"{split}.json")

    def record(row: dict[str, Any]) -> TaskRecord | None:
        answers = [str(item["answer"]) for item in row.get("answers") or []]
        if not answers or (answerable_only and not row.get("answerable", 1)):
            return None  # the test split hides answers
        record_id = f"vizwiz-{Path(str(row['image'])).stem}"
        return TaskRecord(
            id=record_id, dataset="vizwiz", images=[str(resolve_inside(base / split, row["image"], record_id))],
            question=row["question"], answer=answers, task_type="short_answer",
            metadata={"split": split, "judge": "vqa_accuracy", "answer_type": row.get("answer_type"),
                      "answerable": row.get("answerable")})

    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), f"vizwiz-{split}", limit, refused)


def _document(image: str, base: Path, image_dir: Path | None, record_id: str) -> str:
    """``image`` is "documents/x.png"; unpacked copies keep that folder or flatten it (spdocvqa_images/x.png).
    Every candidate stays inside its own root (the release folder or ``image_dir``)."""
    candidates = [resolve_inside(base, image, record_id)]
    if image_dir:
        candidates += [resolve_inside(image_dir, image, record_id),
                       resolve_inside(image_dir, Path(image).name, record_id)]
    return str(next((path for path in candidates if path.exists()), candidates[-1]))


def load_docvqa(root: str, split: str = "val", image_dir: str | None = None, limit: int | None = None) -> TaskDataset:
    base = Path(root)
    path = base / f"{split}_v1.0_withQT.json"
    rows = read_json(path if path.exists() else base / f"{split}_v1.0.json")["data"]
    images = Path(image_dir) if image_dir else None

    def record(row: dict[str, Any]) -> TaskRecord | None:
        if not row.get("answers"):
            return None  # the test split hides answers
        record_id = f"docvqa-{row['questionId']}"
        return TaskRecord(
            id=record_id, dataset="docvqa", images=[_document(row["image"], base, images, record_id)],
            question=row["question"], answer=[str(a) for a in row["answers"]], task_type="short_answer",
            metadata={"split": split, "judge": "anls", "doc_id": row.get("docId"),
                      "question_types": list(row.get("question_types") or [])})

    refused: list[tuple[str, str]] = []
    return take(build_each(rows, record, refused), f"docvqa-{split}", limit, refused)


def _map_answer(answer: Any) -> tuple[str, list[str] | None]:
    if isinstance(answer, list):
        return ", ".join(str(item) for item in answer), [str(item) for item in answer]
    return number_text(answer), None


def load_mapqa(root: str, subset: str = "MapQA_S", split: str = "test", limit: int | None = None) -> TaskDataset:
    """``split`` is ``train``, ``dev`` or ``test`` (the release's ``{split}-QA.json``)."""
    base = Path(root) / subset
    rows = read_json(base / "questions" / f"{split}-QA.json")

    def record(item: tuple[int, dict[str, Any]]) -> TaskRecord:
        index, row = item
        answer, answer_list = _map_answer(row["answer"])
        record_id = f"mapqa-{subset}-{split}-{row.get('question_id', index)}"
        return TaskRecord(
            id=record_id, dataset="mapqa", images=[str(resolve_inside(base / "images", row["map_id"], record_id))],
            question=row["question"], answer=answer, task_type="short_answer",
            metadata={"split": split, "subset": subset, "map_id": row["map_id"], "answer_list": answer_list,
                      "question_type": row.get("question_type")}
            | ({"judge": "set_match"} if answer_list is not None else {}))

    refused: list[tuple[str, str]] = []
    return take(build_each(enumerate(rows), record, refused), f"mapqa-{subset}-{split}", limit, refused)

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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import number_text, read_json, take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord


def load_vizwiz(root: str, split: str = "val", answerable_only: bool = False,
                limit: int | None = None) -> TaskDataset:
    base = Path(root)
    rows = read_json(base / "Annotations" / f"{split}.json")

    def records() -> Iterator[TaskRecord]:
        for row in rows:
            answers = [str(item["answer"]) for item in row.get("answers") or []]
            if not answers or (answerable_only and not row.get("answerable", 1)):
                continue  # the test split hides answers
            yield TaskRecord(
                id=f"vizwiz-{Path(row['image']).stem}", dataset="vizwiz", images=[str(base / split / row["image"])],
                question=row["question"], answer=answers, task_type="short_answer",
                metadata={"split": split, "judge": "vqa_accuracy", "answer_type": row.get("answer_type"),
                          "answerable": row.get("answerable")})

    return take(records(), f"vizwiz-{split}", limit)


def _document(image: str, base: Path, image_dir: Path | None) -> str:
    """``image`` is "documents/x.png"; unpacked copies keep that folder or flatten it (spdocvqa_images/x.png)."""
    candidates = [base / image] + ([image_dir / image, image_dir / Path(image).name] if image_dir else [])
    return str(next((path for path in candidates if path.exists()), candidates[-1]))


def load_docvqa(root: str, split: str = "val", image_dir: str | None = None, limit: int | None = None) -> TaskDataset:
    base = Path(root)
    path = base / f"{split}_v1.0_withQT.json"
    rows = read_json(path if path.exists() else base / f"{split}_v1.0.json")["data"]
    images = Path(image_dir) if image_dir else None
    records = (TaskRecord(
        id=f"docvqa-{row['questionId']}", dataset="docvqa", images=[_document(row["image"], base, images)],
        question=row["question"], answer=[str(a) for a in row["answers"]], task_type="short_answer",
        metadata={"split": split, "judge": "anls", "doc_id": row.get("docId"),
                  "question_types": list(row.get("question_types") or [])},
    ) for row in rows if row.get("answers"))  # the test split hides answers
    return take(records, f"docvqa-{split}", limit)


def _map_answer(answer: Any) -> tuple[str, list[str] | None]:
    if isinstance(answer, list):
        return ", ".join(str(item) for item in answer), [str(item) for item in answer]
    return number_text(answer), None


def load_mapqa(root: str, subset: str = "MapQA_S", split: str = "test", limit: int | None = None) -> TaskDataset:
    base = Path(root) / subset
    rows = read_json(base / "questions" / f"{split}-QA.json")

    def records() -> Iterator[TaskRecord]:
        for index, row in enumerate(rows):
            answer, answer_list = _map_answer(row["answer"])
            yield TaskRecord(
                id=f"mapqa-{subset}-{split}-{row.get('question_id', index)}", dataset="mapqa",
                images=[str(base / "images" / row["map_id"])], question=row["question"], answer=answer,
                task_type="short_answer",
                metadata={"split": split, "subset": subset, "map_id": row["map_id"], "answer_list": answer_list,
                          "question_type": row.get("question_type")}
                | ({"judge": "set_match"} if answer_list is not None else {}))

    return take(records(), f"mapqa-{subset}-{split}", limit)

"""FigureQA and PlotQA: both releases are ``{split}/{qa file}`` holding ``{"qa_pairs": [...]}`` with
``image_index``, ``question_string`` and ``answer``, and the plots in ``{split}/png/{image_index}.png``.
One reader serves both; a :class:`QAPairsLayout` says what differs (file name, answer encoding).

- FigureQA (Maluuba): ``qa_pairs.json``; ``answer`` is 1 (yes) or 0 (no); splits ``train1``,
  ``validation1``, ``validation2`` (the ``no_annot_test`` splits carry no answers and are skipped).
  Records are two-option multiple choice (Yes / No).
- PlotQA (NiteshMethani/PlotQA): ``qa_pairs_V2.json`` (or V1; ``_v2`` spellings too); ``answer`` is a
  number or a text label, ``template`` names the question family and ``type`` the plot type.  Numbers are judged with relaxed accuracy (5%),
  as in the PlotQA paper.

``image_index`` names the plot file, so it goes through :func:`resolve_inside`: a row naming a path
outside ``{split}/png/`` is refused and counted on ``dataset.refused``; the rest load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import (
    build_each,
    choice_fields,
    number_text,
    read_json,
    resolve_inside,
    take,
)
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord


def _yes_no(answer: Any) -> dict[str, Any]:
    if answer not in (0, 1):
        raise ValueError(f"FigureQA answers are 0 or 1, got {answer!r}")
    return choice_fields(["Yes", "No"], 0 if answer == 1 else 1)


def _plot_value(answer: Any) -> dict[str, Any]:
    numeric = isinstance(answer, (int, float)) and not isinstance(answer, bool)
    return {"answer": number_text(answer), "task_type": "numeric" if numeric else "short_answer"}


@dataclass(frozen=True)
class QAPairsLayout:
    dataset: str
    qa_file: str
    answer_fields: Callable[[Any], dict[str, Any]]
    metadata_keys: tuple[str, ...]


FIGUREQA = QAPairsLayout("figureqa", "qa_pairs.json", _yes_no, ("question_id", "color1_name", "color2_name"))
PLOTQA = QAPairsLayout("plotqa", "qa_pairs_{version}.json", _plot_value, ("template", "type"))


def load_qa_pairs(layout: QAPairsLayout, root: str, split: str, limit: int | None = None,
                  **file_vars: str) -> TaskDataset:
    base = Path(root) / split
    name = layout.qa_file.format(**file_vars)
    path = next((p for p in (base / name, base / name.lower()) if p.exists()), base / name)
    data = read_json(path)
    rows = data["qa_pairs"] if isinstance(data, dict) else data  # PlotQA's README also describes a bare list

    def record(item: tuple[int, dict[str, Any]]) -> TaskRecord | None:
        index, row = item
        if row.get("answer") is None:
            return None  # unannotated test splits skipped
        record_id = f"{layout.dataset}-{split}-{index}"
        image = resolve_inside(base / "png", f"{row['image_index']}.png", record_id)
        return TaskRecord(
            id=record_id, dataset=layout.dataset, images=[str(image)], question=row["question_string"],
            metadata={"split": split, "image_index": row["image_index"]}
            | {key: row.get(key) for key in layout.metadata_keys},
            **layout.answer_fields(row["answer"]),
        )

    refused: list[tuple[str, str]] = []
    return take(build_each(enumerate(rows), record, refused), f"{layout.dataset}-{split}", limit, refused)


def load_figureqa(root: str, split: str = "validation1", limit: int | None = None) -> TaskDataset:
    return load_qa_pairs(FIGUREQA, root, split, limit)


def load_plotqa(root: str, split: str = "test", version: str = "V2", limit: int | None = None) -> TaskDataset:
    return load_qa_pairs(PLOTQA, root, split, limit, version=version)

"""Adapters from the public release layouts to :class:`vista_rl.TaskRecord`.

Each reads the files exactly as the dataset authors publish them (paths relative to ``root``):

- ChartQA (vis-nlp/ChartQA): ``{split}/{split}_human.json`` and ``{split}/{split}_augmented.json``,
  lists of ``{"imgname", "query", "label"}``; images in ``{split}/png/``.
- ScienceQA (lupantech/ScienceQA): ``problems.json`` (pid -> question, choices, answer index, hint,
  image, subject, ...), ``pid_splits.json`` (split -> pids), images in ``images/{split}/{pid}/image.png``.
- Geometry3K (lupantech/InterGPS): ``{split}/{id}/data.json`` (problem_text, choices, answer letter,
  ...) with ``{split}/{id}/img_diagram.png``.
- A-OKVQA (allenai/aokvqa): ``aokvqa_v1p0_{split}.json``, lists of ``{question_id, image_id, question,
  choices, correct_choice_idx, direct_answers, rationales, ...}``; images from COCO 2017,
  ``{coco_dir}/{split}2017/{image_id:012d}.jpg``.

Every image path a release file names goes through :func:`resolve_inside`: a record naming a path
outside its release (absolute, ``..``, a symlink leading out) is refused and counted on
``dataset.refused``; the rest load.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from vista_plugin_datasets.common import LETTERS, build_each, resolve_inside
from vista_plugin_datasets.common import read_json as _read_json
from vista_plugin_datasets.common import take as _take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord

_NUMERIC = re.compile(r"^[-+−]?[$€£]?\d[\d,]*(\.\d+)?\s*%?$")


def load_chartqa(root: str, split: str = "test", subset: Literal["human", "augmented", "both"] = "both",
                 limit: int | None = None) -> TaskDataset:
    base = Path(root) / split
    kinds = ["human", "augmented"] if subset == "both" else [subset]
    rows = [(part, index, row) for part in kinds
            for index, row in enumerate(_read_json(base / f"{split}_{part}.json"))]

    def record(item: tuple[str, int, dict[str, Any]]) -> TaskRecord:
        part, index, row = item
        record_id = f"chartqa-{split}-{part}-{index}"
        label = str(row["label"])
        return TaskRecord(
            id=record_id, dataset="chartqa", images=[str(resolve_inside(base / "png", row["imgname"], record_id))],
            question=row["query"], answer=label,
            task_type="numeric" if _NUMERIC.match(label.strip()) else "short_answer",
            metadata={"split": split, "source": part, "imgname": row["imgname"]},
        )

    refused: list[tuple[str, str]] = []
    return _take(build_each(rows, record, refused), f"chartqa-{split}", limit, refused)


def load_scienceqa(root: str, split: str = "test", with_image_only: bool = False,
                   limit: int | None = None) -> TaskDataset:
    base = Path(root)
    problems = _read_json(base / "problems.json")
    pids = _read_json(base / "pid_splits.json")[split]

    def record(pid: Any) -> TaskRecord | None:
        problem = problems[str(pid)]
        image = problem.get("image")
        if with_image_only and not image:
            return None
        record_id = f"scienceqa-{pid}"
        images: list[str] = []
        if image:  # images/{split}/{pid}/{image}: the pid and the file name both come from the release
            folder = resolve_inside(base / "images" / split, str(pid), record_id)
            images.append(str(resolve_inside(folder, str(image), record_id)))
        hint = (problem.get("hint") or "").strip()
        question = f"Context: {hint}\n{problem['question']}" if hint else problem["question"]
        return TaskRecord(
            id=record_id, dataset="scienceqa", images=images,
            question=question, answer=LETTERS[int(problem["answer"])], choices=list(problem["choices"]),
            task_type="multiple_choice",
            metadata={key: problem.get(key) for key in ("subject", "topic", "category", "skill", "grade",
                                                        "lecture", "solution", "task")} | {"split": split},
        )

    refused: list[tuple[str, str]] = []
    return _take(build_each(pids, record, refused), f"scienceqa-{split}", limit, refused)


def load_geometry3k(root: str, split: str = "test", limit: int | None = None) -> TaskDataset:
    base = Path(root) / split
    if not base.is_dir():
        raise FileNotFoundError(f"{base} does not exist; is the dataset root right?")
    folders = sorted((p for p in base.iterdir() if (p / "data.json").exists()),
                     key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name))  # type: ignore[return-value]

    def record(folder: Path) -> TaskRecord:
        # a problem folder that is a symlink leading out of the release is refused before it is read
        inside = resolve_inside(base, folder.name, f"geometry3k-{folder.name}")
        data = _read_json(resolve_inside(inside, "data.json", f"geometry3k-{folder.name}"))
        record_id = f"geometry3k-{data.get('id', folder.name)}"
        choices = [str(c) for c in data["choices"]]
        return TaskRecord(
            id=record_id, dataset="geometry3k",
            images=[str(resolve_inside(inside, "img_diagram.png", record_id))], question=data["problem_text"],
            answer=str(data["answer"]).strip(), choices=choices, task_type="multiple_choice",
            metadata={"split": split, "problem_type_goal": data.get("problem_type_goal"),
                      "problem_type_graph": data.get("problem_type_graph"),
                      "precise_value": data.get("precise_value")},
        )

    refused: list[tuple[str, str]] = []
    return _take(build_each(folders, record, refused), f"geometry3k-{split}", limit, refused)


def load_aokvqa(root: str, coco_dir: str, split: str = "val",
                mode: Literal["multiple_choice", "direct"] = "multiple_choice",
                limit: int | None = None) -> TaskDataset:
    rows = _read_json(Path(root) / f"aokvqa_v1p0_{split}.json")

    def record(row: dict[str, Any]) -> TaskRecord | None:
        record_id = f"aokvqa-{row['question_id']}"
        image = resolve_inside(Path(coco_dir) / f"{split}2017", f"{int(row['image_id']):012d}.jpg", record_id)
        common = {"id": record_id, "dataset": "aokvqa", "images": [str(image)], "question": row["question"]}
        metadata = {"split": split, "rationales": row.get("rationales", []),
                    "difficult_direct_answer": row.get("difficult_direct_answer")}
        if mode == "multiple_choice":
            if row.get("correct_choice_idx") is None:
                return None  # the test split hides answers
            return TaskRecord(**common, answer=LETTERS[int(row["correct_choice_idx"])],
                              choices=list(row["choices"]), task_type="multiple_choice",
                              metadata=metadata | {"direct_answers": row.get("direct_answers")})
        if not row.get("direct_answers"):
            return None
        # every annotator's answer, duplicates kept: they are the votes VQA accuracy counts
        return TaskRecord(**common, answer=[str(a) for a in row["direct_answers"]],
                          task_type="short_answer", metadata=metadata | {"judge": "vqa_accuracy"})

    refused: list[tuple[str, str]] = []
    return _take(build_each(rows, record, refused), f"aokvqa-{split}", limit, refused)

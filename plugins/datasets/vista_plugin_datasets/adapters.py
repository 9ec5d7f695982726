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
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from vista_plugin_datasets.common import LETTERS
from vista_plugin_datasets.common import read_json as _read_json
from vista_plugin_datasets.common import take as _take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord

_NUMERIC = re.compile(r"^[-+−]?[$€£]?\d[\d,]*(\.\d+)?\s*%?$")


def load_chartqa(root: str, split: str = "test", subset: Literal["human", "augmented", "both"] = "both",
                 limit: int | None = None) -> TaskDataset:
    base = Path(root) / split
    kinds = ["human", "augmented"] if subset == "both" else [subset]
    records = []
    for part in kinds:
        for index, row in enumerate(_read_json(base / f"{split}_{part}.json")):
            label = str(row["label"])
            records.append(TaskRecord(
                id=f"chartqa-{split}-{part}-{index}", dataset="chartqa", images=[str(base / "png" / row["imgname"])],
                question=row["query"], answer=label,
                task_type="numeric" if _NUMERIC.match(label.strip()) else "short_answer",
                metadata={"split": split, "source": part, "imgname": row["imgname"]},
            ))
    return _take(records, f"chartqa-{split}", limit)


def load_scienceqa(root: str, split: str = "test", with_image_only: bool = False,
                   limit: int | None = None) -> TaskDataset:
    base = Path(root)
    problems = _read_json(base / "problems.json")
    pids = _read_json(base / "pid_splits.json")[split]
    records = []
    for pid in pids:
        problem = problems[str(pid)]
        image = problem.get("image")
        if with_image_only and not image:
            continue
        hint = (problem.get("hint") or "").strip()
        question = f"Context: {hint}\n{problem['question']}" if hint else problem["question"]
        records.append(TaskRecord(
            id=f"scienceqa-{pid}", dataset="scienceqa",
            images=[str(base / "images" / split / str(pid) / image)] if image else [],
            question=question, answer=LETTERS[int(problem["answer"])], choices=list(problem["choices"]),
            task_type="multiple_choice",
            metadata={key: problem.get(key) for key in ("subject", "topic", "category", "skill", "grade",
                                                        "lecture", "solution", "task")} | {"split": split},
        ))
    return _take(records, f"scienceqa-{split}", limit)


def load_geometry3k(root: str, split: str = "test", limit: int | None = None) -> TaskDataset:
    base = Path(root) / split
    if not base.is_dir():
        raise FileNotFoundError(f"{base} does not exist; is the dataset root right?")
    folders = sorted((p for p in base.iterdir() if (p / "data.json").exists()),
                     key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name))  # type: ignore[return-value]
    records = []
    for folder in folders:
        data = _read_json(folder / "data.json")
        choices = [str(c) for c in data["choices"]]
        records.append(TaskRecord(
            id=f"geometry3k-{data.get('id', folder.name)}", dataset="geometry3k",
            images=[str(folder / "img_diagram.png")], question=data["problem_text"],
            answer=str(data["answer"]).strip(), choices=choices, task_type="multiple_choice",
            metadata={"split": split, "problem_type_goal": data.get("problem_type_goal"),
                      "problem_type_graph": data.get("problem_type_graph"),
                      "precise_value": data.get("precise_value")},
        ))
    return _take(records, f"geometry3k-{split}", limit)


def load_aokvqa(root: str, coco_dir: str, split: str = "val",
                mode: Literal["multiple_choice", "direct"] = "multiple_choice",
                limit: int | None = None) -> TaskDataset:
    rows = _read_json(Path(root) / f"aokvqa_v1p0_{split}.json")
    records = []
    for row in rows:
        image = Path(coco_dir) / f"{split}2017" / f"{int(row['image_id']):012d}.jpg"
        common = {"id": f"aokvqa-{row['question_id']}", "dataset": "aokvqa", "images": [str(image)],
                  "question": row["question"]}
        metadata = {"split": split, "rationales": row.get("rationales", []),
                    "difficult_direct_answer": row.get("difficult_direct_answer")}
        if mode == "multiple_choice":
            if row.get("correct_choice_idx") is None:
                continue  # the test split hides answers
            records.append(TaskRecord(**common, answer=LETTERS[int(row["correct_choice_idx"])],
                                      choices=list(row["choices"]), task_type="multiple_choice",
                                      metadata=metadata | {"direct_answers": row.get("direct_answers")}))
        else:
            if not row.get("direct_answers"):
                continue
            # every annotator's answer, duplicates kept: they are the votes VQA accuracy counts
            records.append(TaskRecord(**common, answer=[str(a) for a in row["direct_answers"]],
                                      task_type="short_answer", metadata=metadata | {"judge": "vqa_accuracy"}))
    return _take(records, f"aokvqa-{split}", limit)

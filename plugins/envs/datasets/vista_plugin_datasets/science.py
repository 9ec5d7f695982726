"""Diagram, icon, table and math-figure benchmarks, each in its release layout:

- AI2D (allenai): ``questions/{imageName}.json`` = ``{"imageName", "questions": {text: {answerTexts,
  correctAnswer, abcLabel, questionId}}}``, diagrams in ``images/``; questions whose ``abcLabel`` is true
  refer to letter-labelled diagrams, read from ``abc_images/`` when present.  The release has no split
  file; ``test_ids`` names a file of image ids, one per line (e.g. the common ``ai2d_test_ids.csv``).
- IconQA (lupantech/IconQA, ``iconqa_data/``): ``problems.json`` (pid -> question, choices, answer,
  ques_type, split, grade, label), images ``iconqa/{split}/{ques_type}/{pid}/image.png`` (each folder
  also holds the problem as ``data.json``).
  ``choose_txt`` has text options; ``choose_img`` options are images (``choices`` names the files in the
  same folder; the record lists them after the question image and labels them "image 2", ...);
  ``fill_in_blank`` answers are numbers, judged as math.
- TabMWP (lupantech/PromptPG): ``problems_{split}.json`` (pid -> question, choices, answer, unit,
  ques_type free_text/multi_choice, ans_type, table, solution, ...), tables as ``tables/{pid}.png``.
  Numeric free-text answers are judged as math, other text by exact match, options as multiple choice.
- MathVista (lupantech/MathVista, GitHub ``data/``): ``{split}.json`` (testmini/test: pid -> question,
  image "images/{pid}.jpg", choices, answer, question_type multi_choice/free_form, answer_type,
  precision, unit, query, metadata); or the Hugging Face export (AI4Math/MathVista), the same fields
  as rows of ``data/{split}-*.parquet`` with the image bytes in ``decoded_image``.  Free-form records use ``query`` (the question with the answer
  format hint); numbers keep ``answer_type`` and ``precision`` in metadata, which the judge follows.

Every image path a release file names (AI2D's ``imageName``, IconQA's and TabMWP's pids, MathVista's
``image``) goes through :func:`resolve_inside`: a record naming a path outside the release is refused
and counted (``dataset.refused``), the rest load.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import build_each, choice_fields, read_json, resolve_inside, take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord


def _numeric_text(value: Any) -> bool:
    try:
        float(str(value).replace(",", "").strip())
    except ValueError:
        return "/" in str(value) and all(part.strip().isdigit() for part in str(value).split("/", 1))
    return True


def _free_answer(answer: Any) -> dict[str, Any]:
    return {"answer": str(answer), "task_type": "math" if _numeric_text(answer) else "short_answer"}


def _numbered(paths: Iterator[Path]) -> list[Path]:
    return sorted(paths, key=lambda p: (0, int(p.stem), "") if p.stem.isdigit() else (1, 0, p.stem))


def load_ai2d(root: str, test_ids: str | None = None, limit: int | None = None) -> TaskDataset:
    base = Path(root)
    if not (base / "questions").is_dir():
        raise FileNotFoundError(f"{base / 'questions'} does not exist; is the dataset root right?")
    wanted = None
    if test_ids:
        wanted = {line.strip().removesuffix(".png") for line in Path(test_ids).read_text().splitlines() if line.strip()}

    refused: list[tuple[str, str]] = []

    def questions(path: Path) -> Iterator[TaskRecord]:
        entry = read_json(path)
        name = str(entry["imageName"])
        if wanted is not None and Path(name).stem not in wanted:
            return
        for text, question in entry["questions"].items():
            record_id = f"ai2d-{question['questionId']}"
            labelled = question.get("abcLabel") and (base / "abc_images").is_dir()
            image = resolve_inside(base / "abc_images", name, record_id) if labelled else None
            if image is None or not image.exists():
                image = resolve_inside(base / "images", name, record_id)
            yield TaskRecord(
                id=record_id, dataset="ai2d", images=[str(image)],
                question=text, metadata={"image_name": name, "abc_label": bool(question.get("abcLabel"))},
                **choice_fields(question["answerTexts"], int(question["correctAnswer"])))

    records = build_each(_numbered((base / "questions").glob("*.json")), questions, refused)
    return take(records, "ai2d" if wanted is None else "ai2d-test", limit, refused)


ICONQA_TYPES = ("choose_txt", "choose_img", "fill_in_blank")


def load_iconqa(root: str, split: str = "test", ques_types: list[str] | None = None,
                limit: int | None = None) -> TaskDataset:
    base = Path(root)
    problems = read_json(base / "problems.json")
    types = set(ques_types or ICONQA_TYPES)
    unknown = types - set(ICONQA_TYPES)
    if unknown:
        raise ValueError(f"unknown IconQA question types {sorted(unknown)}; expected some of {ICONQA_TYPES}")

    refused: list[tuple[str, str]] = []

    def record(item: tuple[str, dict[str, Any]]) -> TaskRecord | None:
        pid, problem = item
        kind = problem["ques_type"]
        if problem.get("split") != split or kind not in types:
            return None
        record_id = f"iconqa-{pid}"
        folder = resolve_inside(base / "iconqa" / split / kind, str(pid), record_id)
        images, question = [str(folder / "image.png")], problem["question"]
        if kind == "fill_in_blank":
            fields = _free_answer(problem["answer"])
        elif kind == "choose_img":
            images += [str(resolve_inside(folder, name, record_id)) for name in problem["choices"]]
            labels = [f"image {k + 2}" for k in range(len(problem["choices"]))]
            question = f"{question}\nThe options are the images after the first one."
            fields = choice_fields(labels, int(problem["answer"]))
        else:
            fields = choice_fields(problem["choices"], int(problem["answer"]))
        return TaskRecord(id=record_id, dataset="iconqa", images=images, question=question,
                          metadata={"split": split, "ques_type": kind, "grade": problem.get("grade"),
                                    "skill": problem.get("label")}, **fields)

    return take(build_each(problems.items(), record, refused), f"iconqa-{split}", limit, refused)


def load_tabmwp(root: str, split: str = "test", limit: int | None = None) -> TaskDataset:
    base = Path(root)
    problems = read_json(base / f"problems_{split}.json")

    refused: list[tuple[str, str]] = []

    def record(item: tuple[str, dict[str, Any]]) -> TaskRecord:
        pid, problem = item
        if problem.get("ques_type") == "multi_choice" and problem.get("choices"):
            fields = choice_fields(problem["choices"], str(problem["answer"]))
        else:
            fields = _free_answer(problem["answer"])
        return TaskRecord(
            id=f"tabmwp-{pid}", dataset="tabmwp", images=[str(resolve_inside(base / "tables", f"{pid}.png", f"tabmwp-{pid}"))],
            question=problem["question"],
            metadata={"split": split, "unit": problem.get("unit"), "ans_type": problem.get("ans_type"),
                      "grade": problem.get("grade"), "table_title": problem.get("table_title"),
                      "table": problem.get("table"), "solution": problem.get("solution")},
            **fields)

    return take(build_each(problems.items(), record, refused), f"tabmwp-{split}", limit, refused)


def _mathvista_problems(base: Path, split: str,
                        image_cache_dir: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """pid -> problem from ``{split}.json``, or from the HF export ``data/{split}-*.parquet`` whose
    ``decoded_image`` bytes are written once to ``image_cache_dir``; the second dict maps a pid to
    that file (our own copy, kept apart from the release's fields so no field can name it)."""
    if (base / f"{split}.json").exists() or not list(base.glob(f"data/{split}-*.parquet")):
        return dict(read_json(base / f"{split}.json")), {}
    from vista_plugin_datasets.records import materialize_image, read_table

    cache = Path(image_cache_dir) if image_cache_dir else base / ".vista-images"
    problems, cached = {}, {}
    for path in sorted(base.glob(f"data/{split}-*.parquet")):
        for row in read_table(path):
            pid = str(row["pid"])
            cell = row.pop("decoded_image", None)
            if cell:  # our own copy of the bytes, written under the cache: not a path the release named
                cached[pid] = materialize_image(cell, cache, f"mathvista-{split}", int(pid) if pid.isdigit() else 0)
            problems[pid] = row
    return problems, cached


def load_mathvista(root: str, split: str = "testmini", image_cache_dir: str | None = None,
                   limit: int | None = None) -> TaskDataset:
    base = Path(root)
    problems, cached = _mathvista_problems(base, split, image_cache_dir)

    refused: list[tuple[str, str]] = []

    def record(item: tuple[str, dict[str, Any]]) -> TaskRecord | None:
        pid, problem = item
        if problem.get("answer") in (None, ""):
            return None  # the test split hides answers
        if problem.get("question_type") == "multi_choice":
            fields, question = choice_fields(problem["choices"], str(problem["answer"])), problem["question"]
        else:
            numeric = problem.get("answer_type") in ("integer", "float")
            fields = {"answer": str(problem["answer"]), "task_type": "math" if numeric else "short_answer"}
            question = problem.get("query") or problem["question"]
        extra = problem.get("metadata") or {}
        image = cached.get(str(pid)) or str(resolve_inside(base, str(problem["image"]), f"mathvista-{pid}"))
        return TaskRecord(
            id=f"mathvista-{pid}", dataset="mathvista", images=[image], question=question,
            metadata={"split": split, "question_type": problem.get("question_type"),
                      "answer_type": problem.get("answer_type"),
                      "precision": problem.get("precision"), "unit": problem.get("unit"),
                      "source": extra.get("source"), "task": extra.get("task"),
                      "skills": list(extra.get("skills") or [])},
            **fields)

    return take(build_each(problems.items(), record, refused), f"mathvista-{split}", limit, refused)

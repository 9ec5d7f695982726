"""Tiny fixtures in the exact public release layouts (for this plugin's tests and for envs that
consume these datasets).  Images are drawn here, so no download is needed."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw


def _image(path: Path, text: str, size: tuple[int, int] = (160, 120), colour: str = "white") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).text((10, 10), text, fill="black")
    image.save(path)


def write_chartqa(root: Path) -> Path:
    """``ChartQA Dataset/test/{test_human,test_augmented}.json`` + ``png/``."""
    base = root / "ChartQA Dataset" / "test"
    human = [{"imgname": "41699051005347.png", "query": "What is the value of Japan in 2019?", "label": "37.5"},
             {"imgname": "multi_col_1234.png", "query": "Which country has the highest share?", "label": "Japan"}]
    augmented = [{"imgname": "two_col_100.png", "query": "What is the sum of the two bars?", "label": "1,250"}]
    base.mkdir(parents=True, exist_ok=True)
    (base / "test_human.json").write_text(json.dumps(human))
    (base / "test_augmented.json").write_text(json.dumps(augmented))
    for row in human + augmented:
        _image(base / "png" / row["imgname"], row["query"][:20])
    return root / "ChartQA Dataset"


def write_scienceqa(root: Path) -> Path:
    """``problems.json`` + ``pid_splits.json`` + ``images/{split}/{pid}/image.png``."""
    root.mkdir(parents=True, exist_ok=True)
    problems = {
        "5": {"question": "Which of these states is farthest north?", "choices": ["Utah", "Maine", "Texas"],
              "answer": 1, "hint": "", "image": "image.png", "task": "closed choice", "grade": "grade4",
              "subject": "social science", "topic": "geography", "category": "Geography", "skill": "Read a map",
              "lecture": "Maps have four cardinal directions.", "solution": "Maine is farthest north.",
              "split": "test"},
        "9": {"question": "Which word would you find on a dictionary page between 'bat' and 'bug'?",
              "choices": ["bone", "cat"], "answer": 0, "hint": "Alphabetical order.", "image": None,
              "task": "closed choice", "grade": "grade2", "subject": "language science", "topic": "reference",
              "category": "Reference skills", "skill": "Use guide words", "lecture": "", "solution": "",
              "split": "test"},
        "12": {"question": "Train question?", "choices": ["a", "b"], "answer": 0, "hint": "", "image": None,
               "task": "", "grade": "", "subject": "", "topic": "", "category": "", "skill": "", "lecture": "",
               "solution": "", "split": "train"},
    }
    (root / "problems.json").write_text(json.dumps(problems))
    (root / "pid_splits.json").write_text(json.dumps({"train": ["12"], "val": [], "test": ["5", "9"]}))
    _image(root / "images" / "test" / "5" / "image.png", "MAP", colour="lightblue")
    return root


def write_geometry3k(root: Path) -> Path:
    """``{split}/{id}/data.json`` + ``img_diagram.png`` (InterGPS layout)."""
    problems = {
        "2401": {"id": 2401, "problem_text": "Find x.", "choices": ["3", "6", "9", "12"], "answer": "B",
                 "diagram_logic_form": ["Equals(LengthOf(Line(A, B)), x)"], "problem_type_graph": ["Triangle"],
                 "problem_type_goal": ["Length"], "precise_value": [3.0, 6.0, 9.0, 12.0]},
        "2402": {"id": 2402, "problem_text": "Find m \\angle 2.", "choices": ["30", "45", "60", "90"], "answer": "D",
                 "problem_type_graph": ["Line"], "problem_type_goal": ["Angle"], "precise_value": [30, 45, 60, 90]},
    }
    for pid, data in problems.items():
        folder = root / "test" / pid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data.json").write_text(json.dumps(data))
        _image(folder / "img_diagram.png", "triangle")
    return root


def write_aokvqa(root: Path) -> tuple[Path, Path]:
    """``aokvqa_v1p0_val.json`` + COCO ``val2017/{image_id:012d}.jpg``; returns (root, coco_dir)."""
    rows = [
        {"split": "val", "image_id": 461751, "question_id": "22jbM6gDxdaMaunuzgrsBB",
         "question": "What is in the motorcyclist's mouth?", "choices": ["toothpick", "food", "popsicle stick", "cigarette"],
         "correct_choice_idx": 3, "direct_answers": ["cigarette"] * 9 + ["smoke"], "difficult_direct_answer": False,
         "rationales": ["He's smoking while riding."]},
        {"split": "val", "image_id": 8, "question_id": "abc", "question": "What season is it?",
         "choices": ["summer", "winter", "spring", "fall"], "correct_choice_idx": 1,
         "direct_answers": ["winter"] * 10, "difficult_direct_answer": False, "rationales": ["Snow."]},
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "aokvqa_v1p0_val.json").write_text(json.dumps(rows))
    coco = root / "coco"
    for row in rows:
        _image(coco / "val2017" / f"{row['image_id']:012d}.jpg", row["question"][:12])
    return root, coco

"""Tiny fixtures in the exact public release layouts (for this plugin's tests and for envs that
consume these datasets).  Images are drawn here, so no download is needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    rows: list[dict[str, Any]] = [
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


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _qa_pairs(root: Path, split: str, qa_file: str, pairs: list[dict]) -> Path:
    _write_json(root / split / qa_file, {"qa_pairs": pairs})
    for index in {pair["image_index"] for pair in pairs}:
        _image(root / split / "png" / f"{index}.png", f"plot {index}")
    return root


def write_figureqa(root: Path) -> Path:
    """``validation1/qa_pairs.json`` (answers 1/0) + ``validation1/png/{image_index}.png``."""
    return _qa_pairs(root, "validation1", "qa_pairs.json", [
        {"image_index": 0, "question_id": 0, "question_string": "Is Dark Blue the minimum?", "answer": 1,
         "color1_name": "Dark Blue", "color1_id": 12, "color2_name": "--None--", "color2_id": -1},
        {"image_index": 0, "question_id": 1, "question_string": "Is Web Gray greater than Lime?", "answer": 0,
         "color1_name": "Web Gray", "color1_id": 40, "color2_name": "Lime", "color2_id": 7},
    ])


def write_plotqa(root: Path) -> Path:
    """``test/qa_pairs_V2.json`` (numbers or labels) + ``test/png/{image_index}.png``."""
    return _qa_pairs(root, "test", "qa_pairs_V2.json", [
        {"image_index": 3, "question_string": "What is the revenue in 2010?", "answer": 26.0,
         "template": "data_retrieval", "type": "vbar_categorical", "answer_bbox": {"x": 1, "y": 2, "w": 3, "h": 4}},
        {"image_index": 3, "question_string": "Which year has the highest revenue?",
         "answer": "2012", "template": "min_max", "type": "vbar_categorical", "answer_bbox": []},
        {"image_index": 4, "question_string": "What is the ratio of the two bars?",
         "answer": 1.2543, "template": "arithmetic", "type": "dot_line", "answer_bbox": []},
    ])


def _geometry_pickle(path: Path, problems: list[dict]) -> None:
    import pickle

    import numpy as np

    for number, problem in enumerate(problems):
        image = np.full((48, 64), 255, dtype=np.uint8)  # the releases store grey diagrams as arrays
        image[10 + number:30, 20] = 0
        problem["image"] = image
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(problems))


def write_geoqa(root: Path) -> Path:
    """``test.pk``: a pickled list of problems (Chinese ``subject``, image array, choices, label)."""
    _geometry_pickle(root / "test.pk", [
        {"id": 1, "subject": "如图，AB∥CD，∠1=50°，则∠2的度数是()", "choices": ["40°", "50°", "130°", "140°"],
         "label": 2, "answer": "∵AB∥CD，∴∠2=180°-∠1=130°", "manual_program": ["g_minus", "C_3", "N_0"],
         "numbers": [50.0], "formal_point": []},
        {"id": 2, "subject": "如图，在⊙O中，∠AOB=80°，则∠ACB=()", "choices": ["30°", "40°", "50°", "80°"],
         "label": 1, "answer": "∠ACB=∠AOB÷2=40°", "manual_program": ["g_half", "N_0"], "numbers": [80.0]},
    ])
    return root


def write_unigeo(root: Path) -> Path:
    """``calculation_test.pk``: the same pickled problems with ``English_problem``."""
    _geometry_pickle(root / "calculation_test.pk", [
        {"id": 7, "English_problem": "As shown in the figure, AB is parallel to CD, angle 1 = 50.0, then angle 2 = ()",
         "subject": "如图...", "choices": ["40°", "50°", "130°", "140°"], "label": 2, "answer": "130°",
         "manual_program": ["g_minus", "C_3", "N_0"], "numbers": [50.0]},
    ])
    return root


def write_mapqa(root: Path) -> Path:
    """``MapQA_S/questions/test-QA.json`` + ``MapQA_S/images/{map_id}``."""
    rows: list[dict[str, Any]] = [
        {"question_id": 101, "question": "Which states have the highest value in the map?", "map_id": "map_17.png",
         "answer": ["Texas", "Ohio"], "question_type": "retrieval"},
        {"question_id": 102, "question": "How many states are in the lowest range?", "map_id": "map_17.png",
         "answer": 12, "question_type": "counting"},
        {"question_id": 103, "question": "What is the value of New Jersey?", "map_id": "map_18.png",
         "answer": "170181-226171", "question_type": "retrieval"},
    ]
    base = root / "MapQA_S"
    _write_json(base / "questions" / "test-QA.json", rows)
    for map_id in {row["map_id"] for row in rows}:
        _image(base / "images" / map_id, map_id)
    return root


def write_vizwiz(root: Path) -> Path:
    """``Annotations/val.json`` (ten answers with confidences) + ``val/VizWiz_val_*.jpg``."""
    def answers(*pairs: tuple[str, int]) -> list[dict]:
        return [{"answer": text, "answer_confidence": "yes"} for text, count in pairs for _ in range(count)]

    rows: list[dict[str, Any]] = [
        {"image": "VizWiz_val_00000000.jpg", "question": "What is this product?",
         "answers": answers(("soy milk", 7), ("milk", 2), ("unanswerable", 1)), "answer_type": "other",
         "answerable": 1},
        {"image": "VizWiz_val_00000001.jpg", "question": "What does this say?",
         "answers": answers(("unanswerable", 10)), "answer_type": "unanswerable", "answerable": 0},
    ]
    _write_json(root / "Annotations" / "val.json", rows)
    for row in rows:
        _image(root / "val" / row["image"], row["question"][:12])
    return root


def write_docvqa(root: Path) -> Path:
    """``val_v1.0_withQT.json`` (``{"data": [...]}``) + ``documents/*.png``."""
    data: list[dict[str, Any]] = [{"questionId": 49153, "question": "What is the ‘actual’ value per 1000, during the year 1975?",
             "question_types": ["figure/diagram"], "image": "documents/pybv0228_81.png", "docId": 14465,
             "ucsf_document_id": "pybv0228", "ucsf_document_page_no": "81", "answers": ["0.28"],
             "data_split": "val"},
            {"questionId": 24581, "question": "What is name of university?", "question_types": ["others"],
             "image": "documents/nkbl0226_1.png", "docId": 7027, "answers": ["university of california",
                                                                              "University of California"],
             "data_split": "val"}]
    _write_json(root / "val_v1.0_withQT.json", {"dataset_name": "SP-DocVQA", "dataset_version": "1.0",
                                                "dataset_split": "val", "data": data})
    for row in data:
        _image(root / row["image"], row["image"][-12:], size=(120, 160))
    return root


def _clevr_questions(path: Path, split: str, questions: list[dict]) -> None:
    _write_json(path, {"info": {"split": split, "version": "1.0"}, "questions": questions})


def write_clevr(root: Path) -> Path:
    """``CLEVR_v1.0/questions/CLEVR_val_questions.json`` + ``images/val/CLEVR_val_*.png``; returns CLEVR_v1.0."""
    base = root / "CLEVR_v1.0"
    _clevr_questions(base / "questions" / "CLEVR_val_questions.json", "val", [
        {"image_index": 0, "split": "val", "image_filename": "CLEVR_val_000000.png", "question_index": 0,
         "question": "Are there more cubes than spheres?", "answer": "yes", "question_family_index": 39,
         "program": [{"inputs": [], "function": "scene", "value_inputs": []}]},
        {"image_index": 0, "split": "val", "image_filename": "CLEVR_val_000000.png", "question_index": 1,
         "question": "How many large things are there?", "answer": "3", "question_family_index": 12},
    ])
    _image(base / "images" / "val" / "CLEVR_val_000000.png", "CLEVR", size=(480, 320), colour="grey")
    return base


def write_clevr_math(root: Path) -> tuple[Path, Path]:
    """``clevr-math-test.json`` + the test renders ``CLEVR_v1.0/images/test/``; returns (root, clevr_dir)."""
    _clevr_questions(root / "clevr-math-test.json", "test", [
        {"split": "test", "image_filename": "CLEVR_test_000003.png", "image_index": 3,
         "question": "Subtract all red cubes. How many objects are left?", "answer": 5,
         "template_filename": "subtraction.json"},
        {"split": "test", "image_filename": "CLEVR_test_000003.png", "image_index": 3,
         "question": "Add 2 small spheres. How many spheres are there?", "answer": 4,
         "template_filename": "addition.json"},
    ])
    clevr_dir = root / "clevr-math-test-images" / "CLEVR_v1.0"
    _image(clevr_dir / "images" / "test" / "CLEVR_test_000003.png", "CLEVR", size=(480, 320), colour="grey")
    return root, clevr_dir


def write_tabmwp(root: Path) -> Path:
    """``problems_test.json`` (pid -> problem) + ``tables/{pid}.png``."""
    problems = {
        "8": {"question": "Some friends played miniature golf. Who scored the most?", "choices": ["Rudy", "Eve"],
              "answer": "Eve", "unit": None, "table_title": "Miniature golf scores",
              "table": "Name | Score\nRudy | 45\nEve | 52", "table_for_pd": {"Name": ["Rudy", "Eve"],
                                                                       "Score": ["45", "52"]},
              "row_num": 3, "column_num": 2, "solution": "52 > 45, so Eve.", "ques_type": "multi_choice",
              "ans_type": "extractive_text", "grade": 2, "split": "test"},
        "15": {"question": "How much would it cost to buy 3 pens?", "choices": None, "answer": "1.35", "unit": "$",
               "table_title": "", "table": "pen | $0.45", "table_for_pd": {}, "row_num": 1, "column_num": 2,
               "solution": "3 x 0.45 = 1.35", "ques_type": "free_text", "ans_type": "decimal_number",
               "grade": 4, "split": "test"},
        "21": {"question": "What fraction of the days were sunny? Simplify your answer.", "choices": None,
               "answer": "3/7", "unit": None, "table_title": "Weather", "table": "sunny | 3\nrainy | 4",
               "table_for_pd": {}, "row_num": 2, "column_num": 2, "solution": "3/7", "ques_type": "free_text",
               "ans_type": "other_text", "grade": 6, "split": "test"},
    }
    _write_json(root / "problems_test.json", problems)
    for pid in problems:
        _image(root / "tables" / f"{pid}.png", f"table {pid}")
    return root


def write_ai2d(root: Path) -> Path:
    """``questions/{image}.json`` + ``images/`` + ``abc_images/`` + a test-id list; returns root."""
    entries = {
        "0.png": {"Which part is the stem?": {"abcLabel": False, "answerTexts": ["roots", "leaf", "stem", "flower"],
                                              "correctAnswer": 2, "questionId": "0.png-0"},
                  "What is A in the diagram?": {"abcLabel": True, "answerTexts": ["ears", "nose", "mouth", "face"],
                                                "correctAnswer": 3, "questionId": "0.png-1"}},
        "12.png": {"How many stages are shown?": {"abcLabel": False, "answerTexts": ["2", "3", "4", "5"],
                                                  "correctAnswer": 1, "questionId": "12.png-0"}},
    }
    for name, questions in entries.items():
        _write_json(root / "questions" / f"{name}.json", {"imageName": name, "questions": questions})
        _image(root / "images" / name, name)
        _image(root / "abc_images" / name, f"abc {name}")
    (root / "ai2d_test_ids.csv").write_text("12\n")
    return root


def write_iconqa(root: Path) -> Path:
    """``problems.json`` + ``pid_splits.json`` ({ques_type}_{split} -> pids) + ``iconqa/{split}/{ques_type}/{pid}/``
    with ``image.png``, ``data.json`` and the choice images."""
    problems: dict[str, dict[str, Any]] = {
        "3": {"question": "Which shape is a cube?", "choices": ["sphere", "cube", "cone"], "answer": 1,
              "ques_type": "choose_txt", "grade": "kindergarten", "label": "shape", "split": "test"},
        "7": {"question": "How many dots are there?", "choices": [], "answer": "9", "ques_type": "fill_in_blank",
              "grade": "grade1", "label": "counting", "split": "test"},
        "11": {"question": "Which picture shows the same number of stars?", "choices": ["choice_0.png",
                                                                                        "choice_1.png"],
               "answer": 0, "ques_type": "choose_img", "grade": "grade1", "label": "counting", "split": "test"},
    }
    _write_json(root / "problems.json", problems)
    problems["20"] = {"question": "Which is taller?", "choices": ["tree", "bush"], "answer": 0,
                      "ques_type": "choose_txt", "grade": "grade1", "label": "compare", "split": "train"}
    _write_json(root / "pid_splits.json", {f"{kind}_{split}": [pid for pid, p in problems.items()
                                                              if p["ques_type"] == kind and p["split"] == split]
                                           for kind in ("choose_txt", "choose_img", "fill_in_blank")
                                           for split in ("train", "val", "test")})
    for pid, problem in problems.items():
        folder = root / "iconqa" / problem["split"] / problem["ques_type"] / pid
        _write_json(folder / "data.json", {k: v for k, v in problem.items() if k != "split"})
        _image(folder / "image.png", problem["question"][:12])
        if problem["ques_type"] == "choose_img":
            for name in problem["choices"]:
                _image(folder / name, name, size=(40, 40))
    return root


def write_mathvista(root: Path) -> Path:
    """``testmini.json`` (pid -> problem with ``query``) + ``images/{pid}.jpg``."""
    def problem(pid: str, question: str, choices: list[str] | None, answer: str, question_type: str,
                answer_type: str, precision: float | None, query: str) -> dict:
        return {"question": question, "image": f"images/{pid}.jpg", "choices": choices, "unit": None,
                "precision": precision, "answer": answer, "question_type": question_type, "answer_type": answer_type,
                "pid": pid, "query": query,
                "metadata": {"split": "testmini", "language": "english", "img_width": 160, "img_height": 120,
                             "source": "FigureQA", "category": "math-targeted-vqa", "task": "figure question answering",
                             "context": "scatter plot", "grade": "college", "skills": ["arithmetic reasoning"]}}

    problems = {
        "1": problem("1", "What is the compressed distance d?", None, "1.2", "free_form", "float", 1.0,
                     "Hint: Please answer the question requiring a floating-point number with one decimal place and "
                     "provide the final value, e.g., 1.2, 1.3, 1.4, at the end.\nQuestion: What is the compressed distance d?"),
        "2": problem("2", "Is Medium Periwinkle the smoothest?", ["yes", "no"], "no", "multi_choice", "text", None,
                     "Hint: Please answer the question and provide the correct option letter.\nQuestion: Is Medium "
                     "Periwinkle the smoothest?\nChoices:\n(A) yes\n(B) no"),
        "3": problem("3", "What is the name of the dog?", None, "Rex", "free_form", "text", None,
                     "Hint: Please answer the question.\nQuestion: What is the name of the dog?"),
    }
    _write_json(root / "testmini.json", problems)
    for pid in problems:
        _image(root / "images" / f"{pid}.jpg", f"mathvista {pid}")
    return root


def write_mathvista_parquet(root: Path) -> Path:
    """The Hugging Face export: ``data/testmini-00000-of-00001.parquet``, images as bytes in ``decoded_image``."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    source = write_mathvista(root / "github")
    problems = json.loads((source / "testmini.json").read_text())
    rows = []
    for pid, problem in problems.items():
        image = io.BytesIO()
        Image.new("RGB", (30 + int(pid), 20), "white").save(image, format="PNG")
        rows.append(problem | {"metadata": problem["metadata"], "decoded_image": {"bytes": image.getvalue(), "path": None}})
    export = root / "hf"
    (export / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), export / "data" / "testmini-00000-of-00001.parquet")
    return export

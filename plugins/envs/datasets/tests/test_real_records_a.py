"""Group A adapters on records copied from their releases (issue 23): ChartQA, ScienceQA, Geometry3K,
A-OKVQA, FigureQA, GeoQA, UniGeo.  Each fixture's README names its source, licence and placeholders.

For every adapter: the conversion is checked field by field against the release file, and the env a
user runs scores the oracle at the maximum and wrong options / far numbers below it
(``check_records_score_right``).  GeoQA/UniGeo ship Python pickles: the restricted unpickler must
load the real structure and refuse a pickle that would run code.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from real_records import LETTERS, check_records_score_right, fixture
from vista_plugin_datasets.common import judge_for
from vista_plugin_datasets.geometry import read_problem_pickle

import vista_rl
from vista_rl import TaskRecord

MC_ENV, OPEN_ENV = "vqa/multiple-choice-v0", "vqa/short-answer-v0"


def load(dataset: str, **config: Any) -> list[TaskRecord]:
    return list(vista_rl.make_dataset(dataset, **config))


# ---------------------------------------------------------------- ChartQA


def chartqa_wrong(record: TaskRecord) -> list[str]:
    """Answers ChartQA's relaxed accuracy must reject: numbers 20% and 50% off (the official rule
    accepts anything within 5%, so +-1 on "23" is *right*), the other yes/no, another word."""
    label = str(record.answer)
    try:
        value = float(label)
    except ValueError:
        return {"yes": ["No"], "no": ["Yes"]}.get(label.lower(), ["zebra crossing"])
    far = [value * 1.2, value * 0.5] if value else [1.0, 2.0]
    return [f"{v:.6g}" for v in far]


def test_chartqa_real_records_convert_and_score():
    root = fixture("chartqa")
    human = json.loads((root / "test" / "test_human.json").read_text())
    augmented = json.loads((root / "test" / "test_augmented.json").read_text())
    records = load("chartqa", root=str(root), split="test")
    assert len(records) == len(human) + len(augmented) == 25
    for record, row in zip(records, human + augmented, strict=True):
        assert record.question == row["query"] and record.answer == row["label"]
        assert Path(record.images[0]).name == row["imgname"] and Path(record.images[0]).is_file()
    by_id = {r.id: r for r in records}
    assert by_id["chartqa-test-human-1"].task_type == "numeric"  # "0.57"
    assert by_id["chartqa-test-human-3"].task_type == "short_answer" and by_id["chartqa-test-human-3"].answer == "No"
    assert by_id["chartqa-test-augmented-10"].answer == "Ted Baker"
    assert judge_for(by_id["chartqa-test-human-8"]) == "exact"  # "Inspired"
    assert check_records_score_right(records, OPEN_ENV, chartqa_wrong) >= 25


def test_chartqa_records_env_on_real_records():
    """The chartqa plugin's own record env (always relaxed accuracy) reads the same release."""
    records = load("chartqa", root=str(fixture("chartqa")), split="test")
    assert check_records_score_right(records, "chartqa/records-v0", chartqa_wrong) >= 25


# ---------------------------------------------------------------- ScienceQA


@pytest.mark.parametrize("split, pids", [("test", ["4", "5", "11", "15"]), ("val", ["6", "7", "14", "16"])])
def test_scienceqa_real_records(split, pids):
    root = fixture("scienceqa")
    problems = json.loads((root / "problems.json").read_text())
    records = load("scienceqa", root=str(root), split=split)
    assert [r.id for r in records] == [f"scienceqa-{pid}" for pid in pids]
    for record, pid in zip(records, pids, strict=True):
        problem = problems[pid]
        assert record.choices == problem["choices"] and record.answer == LETTERS[problem["answer"]]
        assert record.task_type == "multiple_choice" and record.question.endswith(problem["question"])
        if problem["image"]:
            assert record.images == [str(root / "images" / split / pid / "image.png")]
            assert Path(record.images[0]).is_file()
        else:
            assert record.images == []
        assert record.metadata["skill"] == problem["skill"]
    # pid 14's options differ only in case ("A breath of Fresh Air" / "A Breath of Fresh Air"):
    # the wrong one must score below the maximum, which check_records_score_right asserts
    assert check_records_score_right(records, MC_ENV) >= 2 * len(records)


# ---------------------------------------------------------------- Geometry3K


def test_geometry3k_real_records():
    root = fixture("geometry3k")
    records = load("geometry3k", root=str(root), split="train")
    assert [r.id for r in records] == [f"geometry3k-{i}" for i in range(11, 21)]
    for record in records:
        data = json.loads((root / "train" / record.id.split("-")[1] / "data.json").read_text())
        assert record.question == data["problem_text"] and record.choices == data["choices"]
        assert record.answer == data["answer"] and record.metadata["precise_value"] == data["precise_value"]
        assert Path(record.images[0]).name == "img_diagram.png" and Path(record.images[0]).is_file()
    assert records[8].choices[3] == "\\frac { 2 \\sqrt { 2 } } { 5 }"  # LaTeX options kept verbatim
    assert check_records_score_right(records, MC_ENV) == 60


# ---------------------------------------------------------------- A-OKVQA


def official_vqa_accuracy(prediction: str, answers: list[str]) -> float:
    """The VQA accuracy A-OKVQA's direct-answer setting uses (allenai/aokvqa evaluation/eval_predictions.py,
    after the VQA v2 evaluation): min(1, matches / 3), averaged over the 10 leave-one-out subsets."""
    scores = []
    for left_out in range(len(answers)):
        others = answers[:left_out] + answers[left_out + 1:]
        scores.append(min(1.0, sum(a == prediction for a in others) / 3))
    return sum(scores) / len(scores)


def test_aokvqa_real_records_multiple_choice_and_direct():
    root = fixture("aokvqa")
    coco = root / "coco"
    mc = load("aokvqa", root=str(root), coco_dir=str(coco), split="val")
    assert [r.id for r in mc] == ["aokvqa-22jbM6gDxdaMaunuzgrsBB"]
    assert mc[0].answer == "D" and mc[0].choices == ["toothpick", "food", "popsicle stick", "cigarette"]
    assert Path(mc[0].images[0]) == coco / "val2017" / "000000461751.jpg" and Path(mc[0].images[0]).is_file()
    assert check_records_score_right(mc, MC_ENV) == 6

    direct = load("aokvqa", root=str(root), coco_dir=str(coco), split="train", mode="direct")
    record = direct[0]
    assert record.answer == ["ride", "ride", "bus", "taxi", "travelling", "traffic", "taxi", "cab", "cab", "his ride"]
    assert judge_for(record) == "vqa_accuracy" and Path(record.images[0]).name == "000000299207.jpg"
    # no answer has 3 votes here, so the best any model can score is VQA accuracy's 0.6, not 1
    best = max(official_vqa_accuracy(a, record.answer) for a in record.answer)
    assert best == pytest.approx(0.6)
    check_records_score_right(direct, OPEN_ENV, lambda r: ["bus", "zebra crossing"], max_reward=best)
    judge = vista_rl.make_judge("vqa_accuracy")
    for prediction in ("ride", "cab", "bus", "his ride", "zebra crossing"):
        assert judge(prediction, record.answer).score == pytest.approx(official_vqa_accuracy(prediction, record.answer))


# ---------------------------------------------------------------- FigureQA


def test_figureqa_real_records():
    root = fixture("figureqa")
    pairs = json.loads((root / "validation1" / "qa_pairs.json").read_text())["qa_pairs"]
    records = load("figureqa", root=str(root), split="validation1")
    assert len(records) == len(pairs) == 5
    for record, pair in zip(records, pairs, strict=True):
        assert record.question == pair["question_string"] and record.choices == ["Yes", "No"]
        assert record.answer == ("A" if pair["answer"] == 1 else "B")
        assert Path(record.images[0]).name == f"{pair['image_index']}.png" and Path(record.images[0]).is_file()
        assert record.metadata["question_id"] == pair["question_id"]
    assert [r.answer for r in records] == ["B", "B", "B", "A", "B"]
    assert check_records_score_right(records, MC_ENV) == 10


# ---------------------------------------------------------------- GeoQA / UniGeo (pickles)


@pytest.mark.parametrize("dataset, release_file, text_key", [
    ("geoqa", "test.pk", "subject"), ("unigeo", "calculation_test.pk", "English_problem")])
def test_geometry_pickles_real_records(tmp_path, dataset, release_file, text_key):
    root = fixture(dataset)
    problems = read_problem_pickle(root / release_file)
    assert all(isinstance(p["image"], np.ndarray) and p["image"].dtype == np.uint8 for p in problems)
    records = load(dataset, root=str(root), split="test", image_cache_dir=str(tmp_path))
    assert len(records) == len(problems) >= 4
    for record, problem in zip(records, problems, strict=True):
        assert record.id == f"{dataset}-test-{problem['id']}" and record.question == problem[text_key]
        assert record.choices == problem["choices"] and record.answer == LETTERS[problem["label"]]
        image = Path(record.images[0])
        assert image.parent == tmp_path / dataset / "test" and Image.open(image).size == (16, 12)
    assert not (root / ".vista-images").exists()  # the cache went where it was told, not into the release
    assert check_records_score_right(records, MC_ENV) == 6 * len(records)


def test_geometry_pickle_written_by_numpy2_loads_too(tmp_path):
    """numpy 2 writes arrays through numpy._core (and protocol 5 through _frombuffer): same data."""
    problem = {"id": 1, "English_problem": "Find x.", "choices": ["1", "2"], "label": 1,
               "image": np.zeros((4, 4), np.uint8), "answer": np.int64(2)}
    for protocol in (3, 5):
        path = tmp_path / f"p{protocol}.pk"
        path.write_bytes(pickle.dumps([problem], protocol=protocol))
        loaded = read_problem_pickle(path)[0]
        assert loaded["label"] == 1 and loaded["image"].shape == (4, 4) and loaded["answer"] == 2


class _RunsCode:
    """What a hostile 'release' holds: unpickling it would call os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


def test_geometry_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    root = tmp_path / "release"
    root.mkdir()
    (root / "test.pk").write_bytes(pickle.dumps([{"id": 1, "subject": "x", "choices": ["a", "b"], "label": 0,
                                                  "image": _RunsCode(marker)}]))
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load (posix|os|nt)\.system"):
        load("geoqa", root=str(root), split="test", image_cache_dir=str(tmp_path / "cache"))
    assert not marker.exists()
    # the same with a class the allow-list does not name but that is harmless: still refused
    (root / "test.pk").write_bytes(pickle.dumps([{"id": 1, "when": __import__("datetime").date(2021, 1, 1)}]))
    with pytest.raises(pickle.UnpicklingError, match="datetime.date"):
        read_problem_pickle(root / "test.pk")


def test_geometry_pickle_id_cannot_place_a_diagram_outside_the_cache(tmp_path):
    """A problem's ``id`` names its PNG: an id with '..' is refused for that record only."""
    root = tmp_path / "release"
    root.mkdir()
    image = np.zeros((4, 4), np.uint8)
    (root / "calculation_test.pk").write_bytes(pickle.dumps([
        {"id": "../../escaped", "English_problem": "x", "choices": ["a", "b"], "label": 0, "image": image},
        {"id": 7, "English_problem": "y", "choices": ["a", "b"], "label": 1, "image": image}]))
    data = vista_rl.make_dataset("unigeo", root=str(root), split="test", image_cache_dir=str(tmp_path / "cache"))
    assert [r.id for r in data] == ["unigeo-test-7"]
    assert [record_id for record_id, _ in data.refused] == ["unigeo-test-../../escaped"]
    assert not (tmp_path / "escaped.png").exists() and not (tmp_path.parent / "escaped.png").exists()

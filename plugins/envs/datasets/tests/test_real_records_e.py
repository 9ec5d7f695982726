"""Issue 23, group E: real PlotQA, CLEVR-Math and TabMWP records taken from MathVista's redistribution.

MathVista testmini (lupantech/MathVista ``data/testmini.json`` @ a2206f4) carries records of its source
datasets with ``metadata.source``; their questions and answers are put back into each release's own
layout (each fixture's README says which fields are real, which inferred and which placeholders).
For every adapter the conversion is checked field by field against the release file, and the env a
user runs scores the oracle at the maximum and wrong numbers / options below it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from real_records import check_records_score_right, default_wrong_answers, fixture
from vista_plugin_datasets.common import judge_for, judge_spec

import vista_rl
from vista_rl import TaskRecord

OPEN_ENV, RECORDS_ENV = "vqa/short-answer-v0", "vqa/records-v0"


def load(dataset: str, **config: Any) -> list[TaskRecord]:
    return list(vista_rl.make_dataset(dataset, **config))


# ---------------------------------------------------------------- PlotQA


def plotqa_records() -> list[TaskRecord]:
    return load("plotqa", root=str(fixture("plotqa")), split="test")


def plotqa_official(prediction: str, answer: str) -> bool:
    """PlotQA's rule (Methani et al., WACV 2020, section 6: a numeric answer is right within 5% of the
    true value, a text answer by exact match), written as ChartQA's copy of it
    (google-research/pix2struct ``metrics.py`` ``relaxed_correctness``, which parses with ``float``)."""
    try:
        value, target = float(prediction), float(answer)
    except ValueError:
        return prediction.lower() == answer.lower()
    return abs(value - target) / abs(target) <= 0.05 if target else value == target


def far_numbers(record: TaskRecord) -> list[str]:
    """Wrong under a 5% tolerance: 50% and 150% of the answer, and +-1 where 1 is over 5% of it."""
    value = float(str(record.answer))
    wrong = [value * 0.5, value * 1.5] + ([value - 1, value + 1] if abs(value) < 20 else [])
    return [f"{v:g}" for v in wrong]


def test_plotqa_real_questions_convert():
    root = fixture("plotqa")
    pairs = json.loads((root / "test" / "qa_pairs_V2.json").read_text(encoding="utf-8"))["qa_pairs"]
    records = plotqa_records()
    assert [r.id for r in records] == [f"plotqa-test-{i}" for i in range(5)] and len(pairs) == 5
    for record, pair in zip(records, pairs, strict=True):
        assert record.question == pair["question_string"] and record.answer == str(pair["answer"])
        assert record.task_type == "numeric" and record.choices is None
        assert judge_for(record) == "relaxed_numeric"  # PlotQA's own 5% rule
        assert Path(record.images[0]) == root / "test" / "png" / f"{pair['image_index']}.png"
        assert Image.open(record.images[0]).size == (16, 12)
        assert record.metadata["image_index"] == pair["image_index"]
    assert records[1].question == "What is the difference between two consecutive major ticks on the Y-axis ?"
    assert [r.answer for r in records] == ["4", "100", "5", "4", "2"]


def test_plotqa_real_questions_score_right():
    records = plotqa_records()
    assert check_records_score_right(records, OPEN_ENV, far_numbers) == 18
    assert check_records_score_right(records, RECORDS_ENV, far_numbers) == 18


def _plotqa_cases() -> list[tuple[int, str]]:
    answers = ["4", "100", "5", "4", "2"]
    cases = []
    for index, answer in enumerate(answers):
        value = float(answer)
        for prediction in (answer, f"{value:.1f}", f"{value * 1.04:g}", f"{value * 0.96:g}", f"{value * 1.06:g}",
                           f"{value * 0.94:g}", f"{value + 1:g}", "zebra"):
            cases.append((index, prediction))
    return cases


@pytest.mark.parametrize("index, prediction", _plotqa_cases())
def test_plotqa_judging_agrees_with_the_official_rule(index, prediction):
    record = plotqa_records()[index]
    judge_id, settings = judge_spec(record)
    ours = vista_rl.make_judge(judge_id, **settings)(prediction, record.answer).score
    assert ours == float(plotqa_official(prediction, str(record.answer)))


def test_plotqa_scientific_notation_is_read_as_the_number():
    record = plotqa_records()[1]  # answer 100
    judge_id, settings = judge_spec(record)
    assert plotqa_official("1e2", "100")
    judge = vista_rl.make_judge(judge_id, **settings)
    assert judge("1e2", record.answer).score == 1.0 and judge("1.5e9", "1500000000").score == 1.0
    assert judge("1e3", record.answer).score == 0.0


# ---------------------------------------------------------------- CLEVR-Math


def clevr_math_records() -> list[TaskRecord]:
    root = fixture("clevr_math")
    return load("clevr_math", root=str(root), clevr_dir=str(root / "clevr-math-test-images" / "CLEVR_v1.0"),
                split="test")


def test_clevr_math_real_questions_convert():
    root = fixture("clevr_math")
    questions = json.loads((root / "clevr-math-test.json").read_text(encoding="utf-8"))["questions"]
    records = clevr_math_records()
    assert len(records) == len(questions) == 16
    images = root / "clevr-math-test-images" / "CLEVR_v1.0" / "images" / "test"
    for index, (record, row) in enumerate(zip(records, questions, strict=True)):
        assert record.id == f"clevr_math-test-{index}"  # the release has no question_index: the row number
        assert record.question == row["question"] and record.answer == str(row["answer"])
        assert record.task_type == "math" and judge_for(record) == "math" and record.choices is None
        assert Path(record.images[0]) == images / row["image_filename"] and Path(record.images[0]).is_file()
        assert record.metadata["template_filename"] == "subtraction-multihop.json"
    assert records[0].question.startswith("Subtract all large rubber spheres.") and records[0].answer == "4"
    assert sorted({r.answer for r in records}) == ["2", "3", "4", "5", "6", "7"]


def test_clevr_math_real_questions_score_right():
    records = clevr_math_records()
    # nearby numbers (off by one, 10% off, negated): a count is right or wrong, never "close enough"
    assert check_records_score_right(records, OPEN_ENV) == 64
    assert check_records_score_right(records, RECORDS_ENV, lambda r: ["four", "zebra crossing"]) == 32


@pytest.mark.parametrize("prediction, right", [
    ("4", True), ("4.0", True), ("There are 4 objects left.", True), ("4 objects", True),
    ("3", False), ("5", False), ("4.4", False), ("3.9", False), ("", False)])
def test_clevr_math_counts_are_judged_exactly(prediction, right):
    """A CLEVR-Math answer is an integer label (its loading script: ``label: int64``): "4.0" and a
    sentence ending in 4 are the label 4; "3.9" and "4.4" are no label at all."""
    record = clevr_math_records()[0]
    judge_id, settings = judge_spec(record)
    assert (vista_rl.make_judge(judge_id, **settings)(prediction, record.answer).score == 1.0) is right


# ---------------------------------------------------------------- TabMWP (ten more problems)


def tabmwp_records() -> list[TaskRecord]:
    return load("tabmwp", root=str(fixture("tabmwp") / "mathvista"), split="test")


def test_tabmwp_mathvista_problems_convert():
    root = fixture("tabmwp") / "mathvista"
    assert (root / "README.md").is_file()
    problems = json.loads((root / "problems_test.json").read_text(encoding="utf-8"))
    records = tabmwp_records()
    assert [r.id for r in records] == [f"tabmwp-{key}" for key in problems] and len(records) == 10
    for record in records:
        problem = problems[record.id.removeprefix("tabmwp-")]
        assert record.question == problem["question"]
        assert Path(record.images[0]) == root / "tables" / f"{record.id.removeprefix('tabmwp-')}.png"
        assert Path(record.images[0]).is_file()
        if problem["ques_type"] == "multi_choice":
            assert record.task_type == "multiple_choice" and record.choices == problem["choices"]
        else:
            assert record.answer == problem["answer"] and record.task_type != "multiple_choice"
            assert record.choices is None and record.metadata["ans_type"] == problem["ans_type"]
    by_id = {r.id: r for r in records}
    shortage = by_id["tabmwp-mathvista-87"]
    assert shortage.choices == ["shortage", "surplus"] and shortage.answer == "B"
    assert by_id["tabmwp-mathvista-45"].answer == "-3" and by_id["tabmwp-mathvista-144"].answer == "13.8"


def tabmwp_wrong(record: TaskRecord) -> list[str]:
    if record.task_type == "multiple_choice":
        return default_wrong_answers(record)
    value = float(str(record.answer))
    return default_wrong_answers(record) + [f"{-value:g}" if value else "1", f"{value + 0.01:g}"]


def test_tabmwp_mathvista_problems_score_right_through_records_env():
    records = tabmwp_records()
    # nine numbers x 6 wrong answers, and the other option as letter and as text
    assert check_records_score_right(records, RECORDS_ENV, tabmwp_wrong) == 9 * 6 + 2


@pytest.mark.parametrize("key, prediction, right", [
    ("mathvista-44", "$18", True), ("mathvista-44", "18.00", True), ("mathvista-44", "17.99", False),
    ("mathvista-45", "-3.0", True), ("mathvista-45", "-3 minutes per month", True), ("mathvista-45", "3", False),
    ("mathvista-144", "$13.80", True), ("mathvista-144", "13.85", False), ("mathvista-144", "14", False),
    ("mathvista-87", "surplus", True), ("mathvista-87", "Surplus", True), ("mathvista-87", "B", True),
    ("mathvista-87", "shortage", False), ("mathvista-87", "A", False)])
def test_tabmwp_answers_as_models_write_them(key, prediction, right):
    """Units, trailing zeros and the option's text are the same answer; a cent off or the other option
    is not."""
    env = vista_rl.make_env(RECORDS_ENV, records=[r.model_dump() for r in tabmwp_records()],
                            prompt_format="no_think")
    try:
        seed = [r.id for r in tabmwp_records()].index(f"tabmwp-{key}")
        env.reset(seed=seed)
        assert (env.step(f"<answer>{prediction}</answer>").reward == 1.0) is right
    finally:
        env.close()

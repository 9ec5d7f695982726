"""Group B adapters (MapQA, DocVQA) on records copied from their releases: fixtures/real/<id>/README.md
names each source.  Each record goes through the adapter, then through ``vqa/short-answer-v0`` as
``vista eval`` runs it: the oracle earns the maximum, wrong answers less.  DocVQA's ANLS is also run
beside a faithful copy of the official evaluation on the same cases.

VizWiz, CLEVR and CLEVR-Math have no real-record fixture: no public repository we could search holds
records of their releases (see the group B report); their adapters keep the synthetic tests in
test_datasets.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_records import check_records_score_right, fixture
from vista_plugin_judges.anls import levenshtein

import vista_rl
from vista_rl import TaskRecord

# --- DocVQA ----------------------------------------------------------------------------------------


def test_docvqa_real_records_convert():
    root = fixture("docvqa")
    (val,) = vista_rl.make_dataset("docvqa", root=str(root), split="val")
    assert val.id == "docvqa-49153" and val.answer == ["0.28"] and val.task_type == "short_answer"
    assert val.question == "What is the \u2018actual\u2019 value per 1000, during the year 1975?"
    assert val.metadata["judge"] == "anls" and val.metadata["doc_id"] == 14465
    assert val.metadata["question_types"] == ["figure/diagram"]
    assert Path(val.images[0]) == root / "documents" / "pybv0228_81.png" and Path(val.images[0]).is_file()
    # no train_v1.0_withQT.json here: the adapter falls back to train_v1.0.json
    train = vista_rl.make_dataset("docvqa", root=str(root), split="train")
    assert [r.id for r in train] == ["docvqa-337", "docvqa-52212"]
    assert train[1].answer == ["Edward R. Shannon", "Edward Shannon"] and train[1].metadata["question_types"] == []
    assert all(Path(r.images[0]).is_file() for r in train)


def _docvqa_records() -> list[TaskRecord]:
    root = str(fixture("docvqa"))
    return [*vista_rl.make_dataset("docvqa", root=root, split="val"),
            *vista_rl.make_dataset("docvqa", root=root, split="train")]


DOCVQA_WRONG = {
    "docvqa-49153": ["0.82", "1975", "2.8", "0.18 per 1000"],
    "docvqa-337": ["1/8/92", "8/1/93", "January 8", "93"],
    "docvqa-52212": ["Edward R. Shanon", "Shannon", "Robert Shannon", "E. Shannon"],
}


def test_docvqa_oracle_scores_max_and_wrong_answers_less():
    records = _docvqa_records()
    checked = check_records_score_right(records, "vqa/short-answer-v0", wrong_answers=lambda r: DOCVQA_WRONG[r.id])
    assert checked == 12


def official_anls(answers: list[str], prediction: str, threshold: float = 0.5) -> float:
    """The DocVQA evaluation (rrc.cvc.uab.es, task 1 ``evaluate_method``; the same code is in
    Qwen-VL ``eval_mm/infographicsvqa_eval.py`` and lmms-eval ``tasks/_task_utils/vqa_eval_metric``):
    both sides stripped, lower-cased and whitespace-squeezed for the distance, the length taken from
    the raw strings, ``1 - min(NL)`` kept unless it is below the threshold.  The edit distance is
    the plain Levenshtein distance (the judge module's; what is compared here is ANLS's
    normalisation, length and threshold rules around it)."""
    values = []
    for answer in answers:
        gt = " ".join(answer.strip().lower().split())
        det = " ".join(prediction.strip().lower().split())
        length = max(len(answer.upper()), len(prediction.upper()))
        values.append(0.0 if length == 0 else levenshtein(gt, det) / length)
    result = 1 - min(values)
    return 0.0 if result < threshold else result


# what models write: the answer, case and spacing variants, OCR slips, extra words, other values
DOCVQA_PREDICTIONS = {
    "docvqa-49153": ["0.28", " 0.28 ", "0.29", "0.23", ".28", "0.280", "0.28 per 1000", "1975", "0.82"],
    "docvqa-337": ["1/8/93", "1/8/1993", "1 / 8 / 93", "01/08/93", "1/8/92", "January 8, 1993"],
    "docvqa-52212": ["Edward R. Shannon", "edward shannon", "EDWARD R. SHANNON", "Edward R Shannon",
                     "Shannon", "Edward  R.  Shannon", "Dr. Edward R. Shannon"],
}
# Two cases sit exactly on the official threshold ("Shannon" for "Edward Shannon": 7 edits / 14
# characters; "0.82" for "0.28": 2 / 4): the official rule keeps a similarity of 0.5.  The anls judge
# dropped it until H4's fix (issue 23); these cases pin that fix.
DOCVQA_CASES = [pytest.param(record_id, prediction, id=f"{record_id}-{prediction.strip()}")
                for record_id, predictions in sorted(DOCVQA_PREDICTIONS.items()) for prediction in predictions]


@pytest.mark.parametrize(("record_id", "prediction"), DOCVQA_CASES)
def test_docvqa_anls_agrees_with_the_official_script(record_id, prediction):
    record = next(r for r in _docvqa_records() if r.id == record_id)
    ours = vista_rl.make_judge("anls").score(prediction, record.answer).score
    assert ours == pytest.approx(official_anls(list(record.answer), prediction))


# --- MapQA -----------------------------------------------------------------------------------------


def test_mapqa_real_record_converts_to_a_region_set():
    root = fixture("mapqa")
    (record,) = vista_rl.make_dataset("mapqa", root=str(root), subset="MapQA_U", split="test")
    assert record.id == "mapqa-MapQA_U-test-5" and record.task_type == "short_answer"
    assert record.answer == "California, Florida, New York"
    assert record.metadata["answer_list"] == ["California", "Florida", "New York"]
    assert record.metadata["judge"] == "set_match" and record.metadata["question_type"] == "retrieval"
    assert Path(record.images[0]) == root / "MapQA_U" / "images" / "map_0.png" and Path(record.images[0]).is_file()


def test_mapqa_oracle_scores_max_and_wrong_region_sets_less():
    root = fixture("mapqa")
    records = list(vista_rl.make_dataset("mapqa", root=str(root), subset="MapQA_U", split="test"))
    wrong = ["California, Florida", "California, Florida, New York, Texas", "Texas", "California, Florida, New Jersey"]
    assert check_records_score_right(records, "vqa/short-answer-v0", wrong_answers=lambda r: wrong) == 4
    env = vista_rl.make_env("vqa/short-answer-v0", records=[r.model_dump() for r in records], prompt_format="no_think")
    try:
        env.reset(seed=0)  # any order of the same regions is right
        assert env.step("<answer>New York, California, Florida</answer>").reward == pytest.approx(1.0)
    finally:
        env.close()


def test_a_release_row_naming_a_path_outside_the_release_is_refused_alone(tmp_path):
    """The real DocVQA file plus one row whose ``image`` climbs out of the release: that row is
    refused (counted on ``dataset.refused``), the real rows still load."""
    import json
    import shutil

    root = tmp_path / "docvqa"
    shutil.copytree(fixture("docvqa"), root)
    data = json.loads((root / "train_v1.0.json").read_text(encoding="utf-8"))
    data["data"].append({**data["data"][0], "questionId": 1, "image": "../../etc/passwd"})
    (root / "train_v1.0.json").write_text(json.dumps(data), encoding="utf-8")
    train = vista_rl.make_dataset("docvqa", root=str(root), split="train")
    assert [r.id for r in train] == ["docvqa-337", "docvqa-52212"]
    assert [record_id for record_id, _ in train.refused] == ["docvqa-1"]

"""Issue 23, group E for the grounding adapters: V*Bench on three real questions quoted from public
copies of the release (fixtures/real/vstar_bench/README.md says which field came from where)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_real_records import _real_records_helpers

import vista_rl
from vista_rl import TaskRecord

REAL = Path(__file__).parent / "fixtures" / "real"
LETTERS = "ABCDEFGHIJ"


def vstar_root() -> Path:
    root = REAL / "vstar_bench"
    assert (root / "README.md").is_file()
    return root


def other_options(record: TaskRecord) -> list[str]:
    """Every option but the right one, as its letter and as its text."""
    assert isinstance(record.answer, int) and record.choices
    return [text for index, choice in enumerate(record.choices) if index != record.answer
            for text in (LETTERS[index], choice)]


def test_vstar_real_questions_convert():
    root = vstar_root()
    records = list(vista_rl.make_dataset("vstar_bench", root=str(root)))
    assert [r.id for r in records] == ["vstar-direct_attributes-sa_4690", "vstar-direct_attributes-sa_86101",
                                       "vstar-relative_position-sa_79958"]
    for record in records:
        category, stem = record.id.removeprefix("vstar-").rsplit("-", 1)
        row = json.loads((root / category / f"{stem}.json").read_text(encoding="utf-8"))
        assert record.question == row["question"] and record.task_type == "multiple_choice"
        # the release puts the right option first; the adapter rotates the options and points at it
        assert sorted(record.choices) == sorted(row["options"])
        assert record.choices[record.answer] == row["options"][0]
        assert Path(record.images[0]) == root / category / f"{stem}.jpg" and Path(record.images[0]).is_file()
    glove, dustpan, ladder = records
    assert glove.choices[glove.answer] == "rubber" and dustpan.choices[dustpan.answer] == "blue"
    assert ladder.choices[ladder.answer] == "The steel ladder is on the left side of the wagon."
    assert glove.metadata["target_object"] == ["glove"]
    assert glove.metadata["target_boxes"] == [[564.0, 142.0, 719.0, 299.0]]  # x,y,w,h -> x1,y1,x2,y2
    assert dustpan.metadata["target_boxes"] == []


@pytest.mark.parametrize("env_id", ["vqa/multiple-choice-v0", "vqa/records-v0"])
def test_vstar_real_questions_score_right(env_id):
    records = list(vista_rl.make_dataset("vstar_bench", root=str(vstar_root())))
    check = _real_records_helpers().check_records_score_right
    assert check(records, env_id, other_options) == 3 * 2 + 3 * 2 + 1 * 2

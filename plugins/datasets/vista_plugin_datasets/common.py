"""Small helpers every adapter shares: reading the release's files, naming records, lettering
options and saying which judge a record needs."""

from __future__ import annotations

import json
import math
import string
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord

LETTERS = string.ascii_uppercase
#: the judge for each task type when a record does not name one in ``metadata["judge"]``
JUDGE_BY_TASK_TYPE = {"multiple_choice": "multiple_choice", "numeric": "relaxed_numeric", "math": "math"}


def read_json(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is the dataset root right?")
    return json.loads(path.read_text(encoding="utf-8"))


def take(records: Iterable[TaskRecord], name: str, limit: int | None) -> TaskDataset:
    """The first ``limit`` records (all with ``None``); adapters yield records lazily, so a small
    ``limit`` on a large release reads no further than it needs to."""
    return TaskDataset(name, list(islice(records, limit)))


def choice_fields(choices: Sequence[Any], correct: int | str) -> dict[str, Any]:
    """``answer`` (the right option's letter), ``choices`` and ``task_type`` of a multiple-choice
    record; ``correct`` is the option's 0-based index or its text."""
    options = [str(choice) for choice in choices]
    index = correct if isinstance(correct, int) else options.index(str(correct))
    if not 0 <= index < len(options):
        raise ValueError(f"answer index {index} is outside the {len(options)} options")
    return {"answer": LETTERS[index], "choices": options, "task_type": "multiple_choice"}


def number_text(value: Any) -> str:
    """A JSON number as an answer string: 26.0 -> "26", 0.5 -> "0.5"; other values unchanged."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def judge_for(record: TaskRecord) -> str:
    """The judge a record is scored with, by the rule the ``vqa/*`` envs follow: ``metadata["judge"]``
    when the adapter set one (VQA accuracy, ANLS), else the task type's judge, else
    ``relaxed_numeric`` when every reference is a number, else ``exact``."""
    from vista_plugin_judges.numeric import parse_number

    named = record.metadata.get("judge")
    if isinstance(named, str) and named:
        return named
    if record.task_type in JUDGE_BY_TASK_TYPE:
        return JUDGE_BY_TASK_TYPE[record.task_type]
    references = record.answer if isinstance(record.answer, list) else [record.answer]
    if references and all(parse_number(ref) is not None for ref in references):
        return "relaxed_numeric"
    return "exact"

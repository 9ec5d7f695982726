"""Small helpers every adapter shares: reading the release's files, confining the paths a record
names to the release's root, naming records, lettering options and saying which judge a record needs."""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

# resolve_inside and take live beside what they serve (paths, records); adapters import them from here.
from vista_plugin_datasets.paths import PathRefused
from vista_plugin_datasets.paths import resolve_inside as resolve_inside
from vista_plugin_datasets.records import take as take
from vista_rl import TaskRecord

T = TypeVar("T")
LETTERS = string.ascii_uppercase
#: the judge for each task type when a record does not name one in ``metadata["judge"]``
JUDGE_BY_TASK_TYPE = {"multiple_choice": "multiple_choice", "numeric": "relaxed_numeric", "math": "math"}


def read_json(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is the dataset root right?")
    return json.loads(path.read_text(encoding="utf-8"))


def build_each(items: Iterable[T], build: Callable[[T], TaskRecord | Iterable[TaskRecord] | None],
               refused: list[tuple[str, str]]) -> Iterator[TaskRecord]:
    """Records from ``build(item)`` for each release item (one record, several, or None to skip),
    where an item whose path is refused (:class:`PathRefused`) is counted in ``refused`` as
    ``(record id, why)`` and skipped: one hostile item must not cost the rest of the release.
    Pass the same ``refused`` list to :func:`take`."""
    for item in items:
        try:
            built = build(item)
            if built is None:
                continue
            if isinstance(built, TaskRecord):
                yield built
            else:
                yield from list(built)
        except PathRefused as exc:
            refused.append((exc.record_id, str(exc)))


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


def _precision(record: TaskRecord) -> int | None:
    value = record.metadata.get("precision")
    if isinstance(value, bool) or value is None:
        return None
    try:
        digits = int(float(value))
    except (TypeError, ValueError):
        return None
    return digits if 0 <= digits <= 10 else None


def judge_spec(record: TaskRecord) -> tuple[str, dict[str, Any]]:
    """The judge a free-form or multiple-choice record is scored with, and that judge's settings,
    by one rule for ``vista data convert``'s summary and every ``vqa/*`` env:

    - ``metadata["judge"]`` when the adapter set one (VQA accuracy, ANLS, set match);
    - multiple choice: ``multiple_choice``;
    - a number whose release states its precision (MathVista: ``answer_type`` "float" and
      ``precision``): ``math`` rounding both sides to that many decimals, which is MathVista's
      official rule (``round(float(prediction), precision)`` compared with the answer): "20.249" is
      right for "20.25", "21" is not.  MathVista's integers (``int(float(prediction))``, which
      accepts "2.7" for 2) are judged exactly by ``math`` instead, on purpose;
    - otherwise the task type's judge; else ``relaxed_numeric`` when every reference is a number;
      else ``exact``."""
    from vista_plugin_judges.numeric import parse_number

    named = record.metadata.get("judge")
    if isinstance(named, str) and named:
        return named, {}
    if record.task_type == "multiple_choice" and record.choices:
        return "multiple_choice", {}
    references = record.answer if isinstance(record.answer, list) else [record.answer]
    numbers = bool(references) and all(parse_number(ref) is not None for ref in references)
    precision = _precision(record)
    if numbers and record.metadata.get("answer_type") == "float" and precision is not None:
        return "math", {"float_rounding": precision}
    if record.task_type in JUDGE_BY_TASK_TYPE and record.task_type != "multiple_choice":
        return JUDGE_BY_TASK_TYPE[record.task_type], {}
    return ("relaxed_numeric" if numbers else "exact"), {}


def judge_for(record: TaskRecord) -> str:
    """The name of :func:`judge_spec`'s judge (what ``vista data convert`` counts per judge)."""
    return judge_spec(record)[0]

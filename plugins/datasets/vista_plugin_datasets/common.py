"""Small helpers every adapter shares: reading the release's files, confining the paths a record
names to the release's root, naming records, lettering options and saying which judge a record needs."""

from __future__ import annotations

import json
import logging
import math
import os
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, TypeVar

from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord

log = logging.getLogger(__name__)
T = TypeVar("T")
LETTERS = string.ascii_uppercase
#: the judge for each task type when a record does not name one in ``metadata["judge"]``
JUDGE_BY_TASK_TYPE = {"multiple_choice": "multiple_choice", "numeric": "relaxed_numeric", "math": "math"}


def read_json(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is the dataset root right?")
    return json.loads(path.read_text(encoding="utf-8"))


class PathRefused(ValueError):
    """A record names a file outside its declared root (an absolute path, a ``..`` step or a
    symlink that leads out).  Release files are data from whoever published them: a record must not
    make us read ``/etc/passwd`` or copy it into the converted tree.  Carries the record's id so
    the refusal is reported per record (the record is skipped, the run goes on)."""

    def __init__(self, record_id: str, path: str, root: str | Path, why: str) -> None:
        super().__init__(f"record {record_id}: path {path!r} {why} (root {root}); record skipped")
        self.record_id = record_id
        self.path = path


def resolve_inside(root: str | Path, relative: str | Path, record_id: str) -> Path:
    """``root / relative`` for a path a record names, refused with :class:`PathRefused` unless it
    stays inside ``root``: absolute paths (POSIX or Windows, e.g. ``/etc/passwd``, ``C:\\x``) and
    any ``..`` step are refused outright (even ``a/../b``, which a release never needs), and the
    joined path is resolved through symlinks and must still lie under the resolved ``root``.

    Returns the joined path, not the resolved one, so records keep the release's own file names.
    The file need not exist (a missing image is a different, per-record error).  Every adapter
    resolves the image paths it reads from a release file through here: ONE rule, one place."""
    text = str(relative)
    if not text.strip() or "\x00" in text:
        raise PathRefused(record_id, text, root, "is empty or holds a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate: no file can have this name
        raise PathRefused(record_id, text, root, "is not a valid file name") from None
    posix, windows = PurePosixPath(text), PureWindowsPath(text)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or text.startswith(("/", "\\")):
        raise PathRefused(record_id, text, root, "is absolute")
    if ".." in posix.parts or ".." in windows.parts:
        raise PathRefused(record_id, text, root, "steps out with '..'")
    base = Path(root)
    joined = base / text
    resolved_root = base.resolve()
    if not joined.resolve().is_relative_to(resolved_root):
        raise PathRefused(record_id, text, root, "leads outside its root through a symlink")
    return joined


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


def take(records: Iterable[TaskRecord], name: str, limit: int | None,
         refused: list[tuple[str, str]] | None = None) -> TaskDataset:
    """The first ``limit`` records (all with ``None``); adapters yield records lazily, so a small
    ``limit`` on a large release reads no further than it needs to.  ``refused`` (from
    :func:`build_each`) travels on the dataset as ``dataset.refused`` for ``vista data convert``'s
    summary, and is logged."""
    refused = refused if refused is not None else []
    kept = list(islice(records, limit))
    if refused:
        log.warning("%s: %d record(s) refused for paths outside the release; first: %s",
                    name, len(refused), refused[0][1])
    if not kept and refused:
        raise ValueError(f"dataset {name!r}: every record was refused; first: {refused[0][1]}")
    dataset = TaskDataset(name, kept)
    dataset.refused = list(refused)
    return dataset


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

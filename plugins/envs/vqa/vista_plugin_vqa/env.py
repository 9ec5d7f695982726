"""VQA envs over task records: one env that chooses per record, and two restrictions of it.

``vqa/records-v0`` serves mixed releases (MathVista, TabMWP, IconQA hold both kinds): a record with
options is shown its options and scored by the ``multiple_choice`` judge (the letter, or the option
text as models write it); any other record is free-form, scored by the judge that
:func:`vista_plugin_datasets.common.judge_spec` names for it (the record's ``metadata["judge"]``,
a number at the release's stated precision, the task type's judge, ...).  The same rule names the
judges in ``vista data convert``'s summary, so what convert reports is what the env scores.

``vqa/multiple-choice-v0`` accepts only records with options.  ``vqa/short-answer-v0`` never shows
options: a multiple-choice record there is answered in words and scored by which option the text
names, so a neighbouring option ("140°" for "145°", "21" for "20.25") never earns the reward.

The record for a seed is ``records[seed % len(records)]``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar, Literal

from vista_plugin_datasets.common import judge_spec
from vista_plugin_judges.choice import LETTERS, choice_index, format_choices

from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv
from vista_plugin_vqa.records import RecordSource, load_images, load_records
from vista_rl import TaskRecord

Mode = Literal["per_record", "multiple_choice", "short_answer"]


class RecordEnvConfig(QAEnvConfig, RecordSource):
    pass


def letter_index(record: TaskRecord) -> int | None:
    """The index of the right option of a multiple-choice record (answer letter, index or text)."""
    answer = record.answer
    if isinstance(answer, int) and not isinstance(answer, bool):
        return answer
    text = str(answer).strip()
    if len(text) == 1 and text.upper() in LETTERS:
        return LETTERS.index(text.upper())
    return choice_index(text, record.choices)


def has_options(record: TaskRecord) -> bool:
    """Whether a record is multiple choice with its options (what ``vqa/records-v0`` shows)."""
    return bool(record.choices) and record.task_type == "multiple_choice"


class RecordVQAEnv(ToolQAEnv):
    """Per record: options and the ``multiple_choice`` judge where the record has options,
    free-form scoring by :func:`judge_spec` elsewhere."""

    config_class = RecordEnvConfig
    mode: ClassVar[Mode] = "per_record"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.records = load_records(self.config)  # type: ignore[arg-type]

    def task_instructions(self) -> str:
        if self.mode == "multiple_choice":
            return "Each question lists options A, B, C, ...; answer with the letter of the right option."
        if self.mode == "short_answer":
            return "Answer with a short phrase or a number, nothing else."
        return ("When the question lists options A, B, C, ..., answer with the letter of the right option; "
                "otherwise answer with a short phrase or a number, nothing else.")

    def make_problem(self, seed: int) -> Problem:
        record = self.records[seed % len(self.records)]
        images = load_images(record)
        info = {"record_id": record.id, "dataset": record.dataset, "task_type": record.task_type}
        if self.mode == "multiple_choice" or (self.mode == "per_record" and has_options(record)):
            return self._multiple_choice(record, images, info)
        return self._short_answer(record, images, info)

    def _right_option(self, record: TaskRecord) -> int:
        if not record.choices:
            raise ValueError(f"record {record.id} has no choices; use vqa/records-v0 for releases that mix "
                             "multiple-choice and free-form records")
        index = letter_index(record)
        if index is None or not 0 <= index < len(record.choices):
            raise ValueError(f"record {record.id}: answer {record.answer!r} is not one of its options")
        return index

    def _multiple_choice(self, record: TaskRecord, images: list, info: dict[str, Any]) -> Problem:
        index = self._right_option(record)
        letter = LETTERS[index]
        question = f"{record.question}\nOptions:\n{format_choices(record.choices or [])}\nAnswer with the option's letter."
        info["oracle_reasoning"] = f"The right option is {letter}: {(record.choices or [])[index]}."
        return Problem(question, images, letter, "multiple_choice", {"choices": list(record.choices or [])},
                       oracle_answer=letter, info=info)

    def _short_answer(self, record: TaskRecord, images: list, info: dict[str, Any]) -> Problem:
        if has_options(record):  # options hidden: the answer is the option's text, judged by which option it names
            text = (record.choices or [])[self._right_option(record)]
            info["oracle_reasoning"] = f"The answer is {text}."
            return Problem(record.question, images, text, "multiple_choice", {"choices": list(record.choices or [])},
                           oracle_answer=text, info=info)
        reference: Any = record.answer
        references = reference if isinstance(reference, list) else [reference]
        judge, settings = judge_spec(record)
        oracle = str(Counter(map(str, references)).most_common(1)[0][0])  # the most-voted human answer
        info["oracle_reasoning"] = f"The answer is {oracle}."
        return Problem(record.question, images, reference, judge, judge_config=settings, oracle_answer=oracle,
                       info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        if self.problem is not None and self.problem.judge == "multiple_choice":
            return choice_index(answer, self.problem.judge_kwargs.get("choices")) is not None
        return super().answer_is_plausible(answer)


class PerRecordVQAEnv(RecordVQAEnv):
    """Mixed releases: each record is multiple choice or free-form by its own fields."""

    mode = "per_record"


class MultipleChoiceVQAEnv(RecordVQAEnv):
    """Lettered options; the ``multiple_choice`` judge.  Records without options are refused."""

    mode = "multiple_choice"


class ShortAnswerVQAEnv(RecordVQAEnv):
    """Free answers, options never shown; the judge follows the record (see the module doc)."""

    mode = "short_answer"

"""VQA envs over task records: multiple choice (lettered options) and short answer.

The record for a seed is ``records[seed % len(records)]``; the judge follows the record's task type
(multiple_choice -> ``multiple_choice``, numeric -> ``relaxed_numeric``, math -> ``math``, otherwise
``exact`` against the answer or any of a list of answers); a short-answer record may name its judge in
``metadata["judge"]`` (``vqa_accuracy`` for VizWiz's ten votes, ``anls`` for DocVQA).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from vista_plugin_judges.choice import LETTERS, choice_index, format_choices
from vista_plugin_judges.numeric import parse_number

from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv
from vista_plugin_vqa.records import RecordSource, load_images, load_records
from vista_rl import TaskRecord

JUDGE_BY_TYPE = {"numeric": "relaxed_numeric", "math": "math", "multiple_choice": "multiple_choice"}


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


class RecordVQAEnv(ToolQAEnv):
    config_class = RecordEnvConfig
    multiple_choice = True

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.records = load_records(self.config)  # type: ignore[arg-type]

    def task_instructions(self) -> str:
        if self.multiple_choice:
            return "Each question lists options A, B, C, ...; answer with the letter of the right option."
        return "Answer with a short phrase or a number, nothing else."

    def make_problem(self, seed: int) -> Problem:
        record = self.records[seed % len(self.records)]
        images = load_images(record)
        info = {"record_id": record.id, "dataset": record.dataset, "task_type": record.task_type}
        if self.multiple_choice:
            return self._multiple_choice(record, images, info)
        return self._short_answer(record, images, info)

    def _multiple_choice(self, record: TaskRecord, images: list, info: dict[str, Any]) -> Problem:
        if not record.choices:
            raise ValueError(f"record {record.id} has no choices; use vqa/short-answer-v0 for it")
        index = letter_index(record)
        if index is None or not 0 <= index < len(record.choices):
            raise ValueError(f"record {record.id}: answer {record.answer!r} is not one of its options")
        letter = LETTERS[index]
        question = f"{record.question}\nOptions:\n{format_choices(record.choices)}\nAnswer with the option's letter."
        info["oracle_reasoning"] = f"The right option is {letter}: {record.choices[index]}."
        return Problem(question, images, letter, "multiple_choice", {"choices": list(record.choices)},
                       oracle_answer=letter, info=info)

    def _short_answer(self, record: TaskRecord, images: list, info: dict[str, Any]) -> Problem:
        reference: Any = record.answer
        if record.choices and record.task_type == "multiple_choice":
            index = letter_index(record)
            reference = record.choices[index] if index is not None and 0 <= index < len(record.choices) else reference
        references = reference if isinstance(reference, list) else [reference]
        named = record.metadata.get("judge") if record.task_type != "multiple_choice" else None
        if isinstance(named, str) and named:
            judge = named  # the adapter's pick where the task type cannot say it (vqa_accuracy, anls)
        elif record.task_type in JUDGE_BY_TYPE and record.task_type != "multiple_choice":
            judge = JUDGE_BY_TYPE[record.task_type]
        elif all(parse_number(ref) is not None for ref in references):
            judge = "relaxed_numeric"
        else:
            judge = "exact"
        oracle = str(Counter(map(str, references)).most_common(1)[0][0])  # the most-voted human answer
        info["oracle_reasoning"] = f"The answer is {oracle}."
        return Problem(record.question, images, reference, judge, oracle_answer=oracle, info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        if self.multiple_choice and self.problem is not None:
            return choice_index(answer, self.problem.judge_kwargs.get("choices")) is not None
        return super().answer_is_plausible(answer)


class MultipleChoiceVQAEnv(RecordVQAEnv):
    """Lettered options; the ``multiple_choice`` judge."""

    multiple_choice = True


class ShortAnswerVQAEnv(RecordVQAEnv):
    """Free answers; the judge follows the record's task type."""

    multiple_choice = False

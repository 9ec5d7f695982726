"""Multiple-choice judging: models answer "B", "(B)", "B. Paris", "Option B", "The answer is B" or
the option text itself; all of these must pick the same option, and an answer naming two options
picks none."""

from __future__ import annotations

import re
import string
from typing import Any

from vista_rl import Judge, JudgeResult, normalize_answer

LETTERS = string.ascii_uppercase
_BARE_LETTER = re.compile(r"^[\(\[]?([A-Za-z])[\)\]]?[.:]?$")
_LETTER_THEN_TEXT = re.compile(r"^[\(\[]?([A-Z])[\)\]]?[.:)]\s+\S|^[\(\[]([A-Za-z])[\)\]]\s*\S")
_ANSWER_IS_LETTER = re.compile(
    r"^(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)\s*(?:is|:)?\s*:?\s*"
    r"[\(\[]?([A-Za-z])[\)\]]?(?:[.:)]|\s|$)",
    re.IGNORECASE,
)


def option_letters(count: int) -> str:
    return LETTERS[:count]


def format_choices(choices: list[str]) -> str:
    """``["cat", "dog"]`` -> ``"A. cat\\nB. dog"`` (the layout prompts use)."""
    return "\n".join(f"{LETTERS[i]}. {choice}" for i, choice in enumerate(choices))


def _letter(text: str) -> str | None:
    for pattern in (_BARE_LETTER, _LETTER_THEN_TEXT, _ANSWER_IS_LETTER):
        match = pattern.match(text)
        if match:
            return next(group for group in match.groups() if group).upper()
    return None


def choice_index(prediction: Any, choices: list[str] | None) -> int | None:
    """The option a prediction picks, or ``None`` when it picks none or is ambiguous.

    Order: the whole text is an option's text; then a letter ("B", "(b)", "B. text", "Answer: B");
    then the text mentions exactly one option's text as whole words ("It is a cat.")."""
    if prediction is None or isinstance(prediction, (dict, list, float)):
        return None
    text = str(prediction).strip()[:500]
    if not text:
        return None
    count = len(choices) if choices else len(LETTERS)
    normalized_choices = [normalize_answer(c) for c in choices or []]
    whole = normalize_answer(text)
    if whole and normalized_choices.count(whole) == 1:
        return normalized_choices.index(whole)
    letter = _letter(text)
    if letter is not None:
        index = LETTERS.index(letter)
        return index if index < count else None
    mentioned = [i for i, option in enumerate(normalized_choices)
                 if option and re.search(rf"\b{re.escape(option)}\b", whole)]
    return mentioned[0] if len(mentioned) == 1 else None


class MultipleChoiceJudge(Judge):
    """``reference`` is the right option as a letter ("B"), a 0-based index (1) or the option text;
    ``choices`` (a context keyword or constructor default) lists the options."""

    name = "multiple_choice"

    def __init__(self, choices: list[str] | None = None) -> None:
        self.choices = choices

    @staticmethod
    def reference_index(reference: Any, choices: list[str] | None) -> int | None:
        if isinstance(reference, bool):
            return None
        if isinstance(reference, int):
            return reference
        text = str(reference).strip()
        if len(text) == 1 and text.upper() in LETTERS:
            return LETTERS.index(text.upper())
        if choices:
            normalized = [normalize_answer(c) for c in choices]
            if normalize_answer(text) in normalized:
                return normalized.index(normalize_answer(text))
        return choice_index(text, choices)

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        choices = context.get("choices") or self.choices
        target = self.reference_index(reference, choices)
        picked = choice_index(prediction, choices)
        correct = target is not None and picked == target
        return JudgeResult(float(correct), {"picked": picked, "target": target})

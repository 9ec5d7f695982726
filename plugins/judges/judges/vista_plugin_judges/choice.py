"""Multiple-choice judging: models answer "B", "(B)", "B. Paris", "Option B", "The answer is B" or
the option text itself; all of these must pick the same option, and an answer naming two options
picks none."""

from __future__ import annotations

import re
import string
from typing import Any

from vista_rl import Judge, JudgeResult, normalize_answer, strip_reasoning

LETTERS = string.ascii_uppercase
_BARE_LETTER = re.compile(r"^[\(\[]?([A-Za-z])[\)\]]?[.:]?$")
_LETTER_THEN_TEXT = re.compile(r"^[\(\[]?([A-Z])[\)\]]?[.:)]\s+\S|^[\(\[]([A-Za-z])[\)\]]\s*\S")
# "The answer is B", "Answer: (b)"; a lower-case letter only when nothing follows it, so that
# "The answer is a dog" reads as text, not as option A
_ANSWER_IS_LETTER = re.compile(
    r"^(?i:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)\s*(?:is|:)?\s*:?)\s*"
    r"(?:[\(\[]([A-Za-z])[\)\]]|([A-Z])(?=[.:)]|\s|$)|([a-z])(?=[.:)]?$))"
)
_NUMBER_WITH_UNIT = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*([^\d\s]{0,12})$")
_DECIMAL = re.compile(r"^[-+]?\d+\.(\d+)$")


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


def _literal(text: Any) -> str:
    """The text as written (spaces squeezed, a final period dropped): "(b)" is only "(b)", and "E"
    or "(E)" is not "(e)", so an option whose text is itself a label ("(a)" ... "(e)", MathVista
    pid 168) is told apart from a letter."""
    return " ".join(str(text).split()).rstrip(".")


def _number(text: str) -> tuple[float, str] | None:
    match = _NUMBER_WITH_UNIT.match(text.strip().rstrip("."))
    return (float(match.group(1)), match.group(2).casefold()) if match else None


def _symbolic_value_match(text: str, options: list[str]) -> int | None:
    """The one symbolic option ("5 \\sqrt { 3 }", "\\frac { \\sqrt { 2 } } { 5 }") whose value a
    decimal prediction is, rounded to the decimals written: "8.66" or "8.7" for 5 sqrt(3) = 8.660..., as
    Geometry3K's own scoring reads the closest option's value.  Plain-number options never match
    here (they need the number itself), nor does a whole number ("9" is not 8.66)."""
    decimal = _DECIMAL.match(text.strip().rstrip("."))
    if decimal is None or not any("\\" in option for option in options):
        return None
    from vista_plugin_judges.math_judge import latex_value

    value, half_step = float(text.strip().rstrip(".")), 0.5 * 10.0 ** -len(decimal.group(1))
    close = [i for i, option in enumerate(options) if "\\" in option
             and (target := latex_value(option)) is not None and abs(target - value) <= half_step * (1 + 1e-9)]
    return _only(close)


def _only(indices: list[int]) -> int | None:
    return indices[0] if len(indices) == 1 else None


def choice_index(prediction: Any, choices: list[str] | None) -> int | None:
    """The option a prediction picks, or ``None`` when it picks none or is ambiguous.

    Order: the text is an option's text exactly as written ("(b)" is the option "(b)", not
    letter B); then a letter ("B", "(b)", "B. text", "Answer: B") within the options;
    then the text equals one option's text after normalisation; then the same number as exactly one
    option ("145" for "145°"), or a decimal that is one symbolic option's value rounded ("8.66" for
    "5 \\sqrt { 3 }"); then the text mentions exactly one option's text as whole words."""
    if prediction is None or isinstance(prediction, (dict, list, float)):
        return None
    text = strip_reasoning(str(prediction)).strip()[:500]
    if not text:
        return None
    options = [str(c) for c in choices or []]
    count = len(options) if options else len(LETTERS)
    literal = _only([i for i, option in enumerate(options) if _literal(option) == _literal(text)])
    if literal is not None:
        return literal
    letter = _letter(text)
    if letter is not None:
        index = LETTERS.index(letter)
        return index if index < count else None
    normalized_choices = [normalize_answer(c) for c in options]
    whole = normalize_answer(text)
    if whole and normalized_choices.count(whole) == 1:
        return normalized_choices.index(whole)
    number = _number(text)
    if number is not None:
        same = [i for i, option in enumerate(options)
                if (parsed := _number(option)) is not None and parsed[0] == number[0]
                and (not number[1] or not parsed[1] or parsed[1] == number[1])]
        if same:
            return _only(same)
        symbolic = _symbolic_value_match(text, options)
        if symbolic is not None:
            return symbolic
    mentioned = [i for i, option in enumerate(normalized_choices)
                 if option and re.search(rf"\b{re.escape(option)}\b", whole)]
    return _only(mentioned)


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
            return reference if 0 <= reference < (len(choices) if choices else len(LETTERS)) else None
        text = str(reference).strip()
        count = len(choices) if choices else len(LETTERS)
        if len(text) == 1 and text.upper() in LETTERS[:count]:  # adapters store the answer as its letter
            return LETTERS.index(text.upper())
        # otherwise the same reading as a prediction's, so that the reference itself scores 1
        return choice_index(text, choices)

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        choices = context.get("choices") or self.choices
        target = self.reference_index(reference, choices)
        picked = choice_index(prediction, choices)
        correct = target is not None and picked == target
        return JudgeResult(float(correct), {"picked": picked, "target": target})

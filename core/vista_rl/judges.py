"""Core rule judges: exact match and format."""

from __future__ import annotations

import re
import string
from typing import Any

from vista_rl.judge import Judge, JudgeResult
from vista_rl.parsing import ResponseFormat, parse_response

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPACES = re.compile(r"\s+")
_REASONING = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)


def strip_reasoning(text: Any) -> Any:
    """The text without its closed ``<think>...</think>`` blocks.  A raw response handed straight
    to a judge (not the env's parsed ``<answer>``) carries its reasoning in front of the answer, as
    R1-style models write "<think>...</think>B"; the reasoning is not the answer, and reading it
    would pick up every option it weighs.  An unclosed ``<think>`` is left as it is (nothing after
    it is known to be an answer); a non-string is returned unchanged."""
    if not isinstance(text, str) or "</" not in text:
        return text
    return _REASONING.sub(" ", text).strip()


def normalize_answer(text: Any) -> str:
    """Case-fold, drop punctuation and articles, squeeze spaces (SQuAD-style normalisation;
    ``casefold`` rather than ``lower`` so that "STRASSE" and "straße" are one answer)."""
    value = "" if text is None else str(text)
    value = value.casefold().strip()
    value = "".join(ch for ch in value if ch not in string.punctuation)
    value = _ARTICLES.sub(" ", value)
    return _SPACES.sub(" ", value).strip()


def fold_answer(text: Any) -> str:
    """Lower-case, drop surrounding punctuation, squeeze spaces: the light normalisation used when
    SQuAD normalisation leaves nothing.  Option letter "A" and the answer "The" are whole answers,
    and deleting them as articles would make every such reference unmatchable."""
    value = "" if text is None else str(text)
    return _SPACES.sub(" ", value.casefold()).strip().strip(string.punctuation + " ")


def answers_match(prediction: Any, reference: Any) -> bool:
    """``exact``'s rule: SQuAD-normalised equality; where normalisation empties the reference (an
    article or punctuation only: "A", "the", "(a)"), the folded strings must be equal instead, so
    "A" matches "a" and "(A)" but not "the" or ""."""
    ref = normalize_answer(reference)
    if ref:
        return normalize_answer(prediction) == ref
    folded = fold_answer(reference)
    return bool(folded) and fold_answer(prediction) == folded


class ExactMatchJudge(Judge):
    """1.0 when the normalised prediction equals the normalised reference (or any of a list)."""

    name = "exact"

    def __init__(self, normalize: bool = True) -> None:
        self.normalize = normalize

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        references = reference if isinstance(reference, (list, tuple)) else [reference]
        prediction = strip_reasoning(prediction)
        if self.normalize:
            pred = normalize_answer(prediction) or fold_answer(prediction)
            matched = next((ref for ref in references if answers_match(prediction, ref)), None)
        else:
            pred = "" if prediction is None else str(prediction).strip()
            matched = next((ref for ref in references if pred and str(ref).strip() == pred), None)
        return JudgeResult(1.0 if matched is not None else 0.0, {"prediction": pred, "matched": matched})


class FormatJudge(Judge):
    """1.0 when the response contains the required tags (``reference`` is ignored)."""

    name = "format"

    def __init__(self, required: tuple[str, ...] = ("think", "answer"), strict: bool = False) -> None:
        self.response_format = ResponseFormat(required=tuple(required), strict=strict)

    def score(self, prediction: Any, reference: Any = None, **context: Any) -> JudgeResult:
        parsed = parse_response(prediction, self.response_format)
        return JudgeResult(1.0 if parsed.format_ok else 0.0, {"errors": parsed.errors})

"""ANLS, DocVQA's metric: 1 - normalised Levenshtein distance to the closest reference answer,
counted as 0 once that distance passes ``threshold`` (0.5; the official script keeps exactly 0.5), so an OCR slip ("0.28" vs "0.23")
keeps most of the credit but a different answer earns none.  Both sides are lower-cased and
whitespace is squeezed, as in the DocVQA evaluation."""

from __future__ import annotations

from typing import Any

from vista_rl import Judge, JudgeResult


def levenshtein(a: str, b: str) -> int:
    """Edit distance with one row of memory."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _clean(text: Any) -> str:
    return " ".join(str(text).lower().split())


class ANLSJudge(Judge):
    """``reference``: one answer or a list of accepted answers; the best one counts."""

    name = "anls"

    def __init__(self, threshold: float = 0.5) -> None:
        if not 0 < threshold <= 1:
            raise ValueError("threshold must be in (0, 1]")
        self.threshold = threshold

    def similarity(self, prediction: str, answer: str) -> float:
        longest = max(len(prediction), len(answer))
        if longest == 0:
            return 0.0
        if abs(len(prediction) - len(answer)) / longest > self.threshold:
            return 0.0  # the distance is at least the length gap: skip the O(n*m) table
        distance = levenshtein(prediction, answer) / longest
        # the official script zeroes a similarity *below* the threshold: exactly 0.5 keeps 0.5
        return 1.0 - distance if distance <= self.threshold else 0.0

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        if prediction is None or isinstance(prediction, (dict, list, bool, float)):
            return JudgeResult(0.0, {"reason": "prediction is not text"})
        answers = reference if isinstance(reference, (list, tuple)) else [reference]
        text = _clean(prediction)
        if not text:
            return JudgeResult(0.0, {"reason": "empty prediction"})
        scored = [(self.similarity(text, _clean(answer)), str(answer)) for answer in answers if answer is not None]
        best, matched = max(scored, default=(0.0, None))
        return JudgeResult(best, {"matched": matched})

"""Unordered list answers ("Which states have the highest value?" -> "Texas, Ohio"): right when the
prediction names the same items, in any order, each normalised as ``exact`` does.  Items are split
on commas, semicolons and a final "and"; a reference may also be a list of items."""

from __future__ import annotations

import re
from typing import Any

from vista_rl import Judge, JudgeResult, normalize_answer

_SEPARATORS = re.compile(r"\s*(?:,|;|\band\b|&)\s*", re.IGNORECASE)
MAX_ANSWER_CHARS = 2000


def answer_items(value: Any) -> frozenset[str]:
    """The normalised items of an answer: a list as given, a string split on separators."""
    parts = [str(v) for v in value] if isinstance(value, (list, tuple)) else _SEPARATORS.split(str(value))
    return frozenset(item for item in map(normalize_answer, parts) if item)


class SetMatchJudge(Judge):
    name = "set_match"

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        if prediction is None or isinstance(prediction, (dict, bool, float)):
            return JudgeResult(0.0, {"reason": "prediction is not text or a list"})
        if isinstance(prediction, str) and len(prediction) > MAX_ANSWER_CHARS:
            return JudgeResult(0.0, {"reason": f"prediction longer than {MAX_ANSWER_CHARS} characters"})
        predicted, expected = answer_items(prediction), answer_items(reference)
        correct = bool(expected) and predicted == expected
        return JudgeResult(float(correct), {"missing": sorted(expected - predicted),
                                            "extra": sorted(predicted - expected)})

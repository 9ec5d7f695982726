"""{{ cookiecutter.__item_prefix }}Judge: score a numeric answer against a reference with a tolerance.

This is the example to replace with your own judge.  It shows what every VISTA judge does:
- ``score(prediction, reference, **context)`` returns a ``JudgeResult`` with a value in
  ``[0, max_score]`` and details that explain it;
- it never raises on a malformed prediction (None, prose, a dict, NaN): that scores 0, with the
  reason in ``details``, so one bad rollout cannot stop training.
"""

from __future__ import annotations

import math
import re
from typing import Any

from vista_rl import Judge, JudgeResult

NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def parse_number(value: Any) -> float | None:
    """The first number in ``value`` (``"1,234.5 kg"`` gives 1234.5; ``"12%"`` gives 12), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        match = NUMBER.search(str(value).replace(",", ""))
        if match is None:
            return None
        number = float(match.group())
    return number if math.isfinite(number) else None


class {{ cookiecutter.__item_prefix }}Judge(Judge):
    """1.0 when ``|prediction - reference| <= relative_tolerance * |reference|`` (or within
    ``absolute_tolerance``, which matters for a reference of 0), else 0.0."""

    name = "{{ cookiecutter.__item_name }}"

    def __init__(self, relative_tolerance: float = 0.05, absolute_tolerance: float = 1e-9) -> None:
        if relative_tolerance < 0 or absolute_tolerance < 0:
            raise ValueError("relative_tolerance and absolute_tolerance must be >= 0")
        self.relative_tolerance = relative_tolerance
        self.absolute_tolerance = absolute_tolerance

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        target = parse_number(reference)
        if target is None:
            return JudgeResult(0.0, {"error": f"reference {reference!r} is not a number"})
        value = parse_number(prediction)
        if value is None:
            return JudgeResult(0.0, {"error": "no number in the prediction", "reference": target})
        close = math.isclose(value, target, rel_tol=self.relative_tolerance, abs_tol=self.absolute_tolerance)
        relative_error = abs(value - target) / max(abs(target), 1e-12)
        details = {"prediction": value, "reference": target, "relative_error": relative_error}
        return JudgeResult(1.0 if close else 0.0, details)

"""ChartQA's relaxed accuracy, written out so its edge cases are explicit.

A numeric reference accepts a prediction within ``tolerance`` relative error (5% by default, the
ChartQA paper's rule); anything else needs an exact match after normalisation.  Unlike the three
judges in VISTA-Gym there is no substring containment (reference "1" must not match "10"), and a
year-like reference ("2019") needs the exact year: 5% of 2019 is a century.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from vista_rl import Judge, JudgeResult, normalize_answer, strip_reasoning

_HEDGES = r"(?:about|approximately|approx\.?|around|roughly|nearly|~|≈)"
_NUMBER_RE = re.compile(
    rf"^(?:{_HEDGES}\s*)?"
    r"(?P<sign>[-+−])?\s*(?P<currency>[$€£¥])?\s*(?P<sign2>[-+−])?\s*"
    r"(?P<number>(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d{1,3})?)"  # 1.5e9: float() reads it
    r"\s*(?P<percent>%|percent\b|per\s?cent\b)?"
    r"\s*(?P<unit>[^\d\s][^\d]{0,24})?$",
    re.IGNORECASE,
)
_FRACTION_RE = re.compile(r"^([-+]?\d{1,9})\s*/\s*(\d{1,9})$")
_YEAR_RE = re.compile(r"^(1[89]\d\d|20\d\d|2100)$")
MAX_ANSWER_CHARS = 200  # longer text is not a chart answer; skip the regex on it


@dataclass(frozen=True)
class ParsedNumber:
    value: float
    percent: bool
    unit: str
    text: str


def parse_number(text: Any) -> ParsedNumber | None:
    """Read one number with optional sign, currency, thousands separators, percent sign and a short
    trailing unit ("12.5 kg", "$1,200", "45%", "−3").  Anything else (two numbers, words) is
    ``None``: a text answer, judged by exact match."""
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        try:
            number = float(text)
        except OverflowError:  # an int beyond float range is no chart value
            return None
        return ParsedNumber(number, False, "", str(text)) if math.isfinite(number) else None
    value = str(text).strip().rstrip(".").strip()
    if not value or len(value) > MAX_ANSWER_CHARS:
        return None
    fraction = _FRACTION_RE.match(value)
    if fraction:  # TabMWP writes "3/4"; its official rule reads it as 0.75
        numerator, denominator = float(fraction.group(1)), float(fraction.group(2))
        return ParsedNumber(numerator / denominator, False, "", value) if denominator else None
    match = _NUMBER_RE.match(value)
    if not match:
        return None
    number = float(match.group("number").replace(",", ""))
    if not math.isfinite(number):  # 400 digits read as inf: no chart value
        return None
    if (match.group("sign") or match.group("sign2") or "") in {"-", "−"}:
        number = -number
    unit = (match.group("unit") or "").strip().lower()
    if unit and not re.fullmatch(r"[a-z°/%.\s]+", unit):
        return None  # e.g. "12 and 14": the tail is not a unit
    return ParsedNumber(number, bool(match.group("percent")), unit, value)


def is_year(text: Any) -> bool:
    return isinstance(text, (str, int)) and not isinstance(text, bool) and bool(_YEAR_RE.match(str(text).strip()))


class RelaxedNumericJudge(Judge):
    """1.0 when the prediction is within ``tolerance`` relative error of a numeric reference, or
    equals a text reference after normalisation.  ``reference`` may be a list (any match counts).

    ``percent_as_fraction`` also accepts 0.45 for "45%" (and 45 for "0.45" when the prediction has
    a % sign); ChartQA's standard metric does not, so it is off by default.
    """

    name = "relaxed_numeric"

    def __init__(self, tolerance: float = 0.05, absolute_tolerance: float = 0.0,
                 exact_years: bool = True, percent_as_fraction: bool = False) -> None:
        if tolerance < 0 or absolute_tolerance < 0:
            raise ValueError("tolerance and absolute_tolerance must be >= 0")
        self.tolerance = tolerance
        self.absolute_tolerance = absolute_tolerance
        self.exact_years = exact_years
        self.percent_as_fraction = percent_as_fraction

    def _close(self, predicted: float, target: float) -> tuple[bool, float]:
        error = abs(predicted - target)
        if target == 0:
            return error <= self.absolute_tolerance, error
        relative = error / abs(target)
        return relative <= self.tolerance or error <= self.absolute_tolerance, relative

    def _score_one(self, prediction: Any, reference: Any) -> tuple[float, dict[str, Any]]:
        ref_num = parse_number(reference)
        if ref_num is None:
            pred_text, ref_text = normalize_answer(prediction), normalize_answer(reference)
            return float(bool(pred_text) and pred_text == ref_text), {"mode": "text"}
        pred_num = parse_number(prediction)
        if pred_num is None:
            return 0.0, {"mode": "numeric", "reason": "prediction is not a number"}
        if self.exact_years and is_year(reference):
            return float(pred_num.value == ref_num.value), {"mode": "year"}
        ok, error = self._close(pred_num.value, ref_num.value)
        details: dict[str, Any] = {"mode": "numeric", "relative_error": error}
        if not ok and self.percent_as_fraction:
            for scaled in (pred_num.value * 100, pred_num.value / 100):
                if self._close(scaled, ref_num.value)[0]:
                    ok, details["percent_as_fraction"] = True, True
                    break
        return float(ok), details

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        references = list(reference) if isinstance(reference, (list, tuple)) else [reference]
        prediction = strip_reasoning(prediction)
        best, best_details = 0.0, {"mode": "none"}
        for ref in references:
            value, details = self._score_one(prediction, ref)
            if value > best or best_details.get("mode") == "none":
                best, best_details = value, {**details, "reference": ref}
            if best >= 1.0:
                break
        return JudgeResult(best, best_details)

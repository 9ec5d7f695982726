"""Mathematical equivalence through math-verify: "\\frac{1}{2}", "0.5" and "1/2" are one answer,
"x = 3" matches "3", and \\boxed{} answers are extracted.

math-verify guards parsing and comparison with ``signal.alarm`` timeouts, which only work in the
main thread; elsewhere (rollout worker threads) they are switched off and the input length cap is
what bounds the cost.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from typing import Any

from vista_rl import Judge, JudgeResult, strip_reasoning

MAX_PREDICTION_CHARS = 2000  # final answers sit at the end; a megabyte of text must stay cheap
#: the loggers math-verify warns "Timeout is disabled ..." on, once per process and thread pool
MATH_VERIFY_LOGGERS = ("math_verify.parser", "math_verify.grader")


class TimeoutDisabledFilter(logging.Filter):
    """Drops exactly math-verify's "Timeout is disabled ..." warning.  Off the main thread we pass
    no timeout on purpose (``signal.alarm`` only works there; the length cap bounds the cost), so
    the warning says nothing new and floods eval logs from every worker; every other record of
    these loggers (parse errors, real warnings) passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


_FILTER = TimeoutDisabledFilter()


def quiet_timeout_warning() -> None:
    """Install the filter on math-verify's loggers (idempotent)."""
    for name in MATH_VERIFY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


quiet_timeout_warning()


def _as_latex(text: str, bare_text_too: bool = False) -> str:
    """Wrap bare LaTeX ("2\\sqrt{3}", "2^{2}") in $...$ so math-verify reads it as LaTeX, not as
    text (as text, "2^{2}" reads as the numbers 2 and 2)."""
    if any(marker in text for marker in ("$", "\\boxed", "\\(", "\\[")):
        return text
    latex_like = "\\" in text or ("{" in text and any(mark in text for mark in "^_"))
    return f"${text}$" if (latex_like or bare_text_too) else text


def _main_thread_timeout(seconds: int) -> int | None:
    return seconds if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=1024)
def latex_value(text: str, timeout_seconds: int = 5) -> float | None:
    """The number a short LaTeX expression stands for ("5 \\sqrt { 3 }" -> 8.660..., "\\frac{1}{2}"
    -> 0.5), or ``None`` when it is not one finite number (an equation, text, a parse failure).
    Multiple-choice judging uses it to read a decimal answer against symbolic options; options
    repeat across calls, hence the cache."""
    from math_verify import parse

    if len(text) > 200:
        return None
    try:
        parsed = parse(_as_latex(text, bare_text_too=True), parsing_timeout=_main_thread_timeout(timeout_seconds))  # type: ignore[arg-type]
        value = float(parsed[0].evalf()) if parsed and hasattr(parsed[0], "evalf") else None
    except Exception:  # noqa: BLE001 - an option math-verify cannot evaluate simply has no value
        return None
    return value if value is not None and math.isfinite(value) else None


class MathJudge(Judge):
    name = "math"

    def __init__(self, timeout_seconds: int = 5, float_rounding: int = 6) -> None:
        self.timeout_seconds = timeout_seconds
        self.float_rounding = float_rounding

    def _timeout(self) -> int | None:
        return _main_thread_timeout(self.timeout_seconds)

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        from math_verify import parse, verify

        if prediction is None or isinstance(prediction, (dict, list)):
            return JudgeResult(0.0, {"reason": "prediction is not text"})
        text = strip_reasoning(str(prediction))
        if isinstance(prediction, float) and prediction != prediction:  # NaN
            return JudgeResult(0.0, {"reason": "prediction is NaN"})
        text = text[-MAX_PREDICTION_CHARS:].strip()
        if not text:
            return JudgeResult(0.0, {"reason": "empty prediction"})
        timeout = self._timeout()
        references = list(reference) if isinstance(reference, (list, tuple)) else [reference]
        try:
            parsed_prediction = parse(_as_latex(text), parsing_timeout=timeout)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - math-verify can raise on odd LaTeX
            return JudgeResult(0.0, {"reason": f"could not parse: {type(exc).__name__}"})
        if not parsed_prediction:
            return JudgeResult(0.0, {"reason": "no mathematical answer found"})
        errors: list[str] = []
        for ref in references:
            ref_text = str(ref)
            try:
                gold = parse(_as_latex(ref_text, bare_text_too=True), parsing_timeout=timeout)  # type: ignore[arg-type]
                if not gold:
                    gold = parse(ref_text, parsing_timeout=timeout)  # type: ignore[arg-type]
                if gold and verify(gold, parsed_prediction, float_rounding=self.float_rounding,
                                   timeout_seconds=timeout):
                    return JudgeResult(1.0, {"parsed": [str(p) for p in parsed_prediction], "reference": ref})
            except Exception as exc:  # noqa: BLE001 - one unreadable reference must not stop the others
                errors.append(f"reference {ref_text[:40]!r}: {type(exc).__name__}: {exc}"[:200])
        details: dict[str, Any] = {"parsed": [str(p) for p in parsed_prediction]}
        if errors:  # recorded, not swallowed: a reference math-verify cannot read is a data bug
            details["errors"] = errors
        return JudgeResult(0.0, details)

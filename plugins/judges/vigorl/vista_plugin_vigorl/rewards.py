"""ViGoRL's grounded-reasoning rewards, as VISTA judges.

Single turn (SAT-2, V* single-turn, web grounding): ``0.5·acc + 0.5·(format·coordinate)`` where
``format`` is ``<think>…</think> <answer>…</answer>`` with a non-empty answer and ``coordinate`` is
1 when the thought cites at least ``min_coordinates`` distinct integer ``(x, y)`` points.

Multi turn (zoom with ``search_coordinate``): ``0.6·acc + 0.4·format`` where ``format`` is the
grammar ``<think>`` (``<tool_call>`` ``<observation>`` ``<think>``)* ``<answer>``, every tool call's
``coordinate`` a list of two integers, plus ``0.2`` for every unique coordinate beyond the first
(unique: at least 10 px from every earlier one), so format can exceed 1.  The bonus is capped at
``max_coordinates`` points (ViGoRL allows 4 crops: ``LIMIT_IMAGES=5`` with the full image), which
keeps ``max_score`` finite.

``acc`` is a string match (lower case, a leading option letter "A." / "A)" dropped) or point-in-box
(answer ``(x, y)`` inside the reference box ``[x1, y1, x2, y2]``).  Intermediate points are never
judged for correctness, only counted (ViGoRL rewards outcome and format only).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from vista_plugin_judges.boxes import point_in_box, read_numbers
from vista_plugin_judges.points import unique_points

from vista_rl import Judge, JudgeResult

AccuracyMode = Literal["string", "point_in_box"]

COORDINATE = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")
_THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")
OPTION_PREFIX = re.compile(r"^\s*\(?[A-Za-z]\s*[.)]\s+")
STRUCTURAL_TAGS = ("think", "tool_call", "observation", "answer")
_TAG = re.compile(r"<(/?)(" + "|".join(STRUCTURAL_TAGS) + r")>")
END_MARKERS = ("<|im_end|>", "<|endoftext|>")
MAX_TEXT = 200_000  # longer predictions are malformed, not parsed


def strip_option(text: str) -> str:
    """``"A. left"`` -> ``"left"``; ViGoRL answers carry the option text, not the letter."""
    return OPTION_PREFIX.sub("", text, count=1).strip()


def string_match(answer: str | None, reference: Any) -> bool:
    """Exact lower-case match after dropping a leading option letter (either side); a list of
    references matches any."""
    if not answer or not answer.strip():
        return False
    references = reference if isinstance(reference, (list, tuple)) else [reference]
    pred = strip_option(answer).lower()
    return any(pred == strip_option(str(ref)).lower() for ref in references if ref is not None)


def point_accuracy(answer: str | None, reference: Any, scale: float = 1.0) -> bool:
    """The answer's first ``(x, y)`` (times ``scale``) lies inside the reference box."""
    box = read_numbers(reference, 4)
    if box is None:
        raise ValueError(f"point-in-box reference must be a box [x1, y1, x2, y2], got {reference!r}")
    point = read_numbers(answer, 2) if answer else None
    return point is not None and point_in_box((point[0] * scale, point[1] * scale), box)


def tag_contents(text: str, tag: str) -> list[str]:
    """What every ``<tag>...</tag>`` pair holds, left to right (non-overlapping, lazy), as
    ``re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL)`` gives, in linear time: that regex retries
    from every unclosed opening, so 100 KB of ``<answer>`` took 15 s (issue 22)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    found: list[str] = []
    position = 0
    while (start := text.find(opening, position)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        found.append(text[start + len(opening):end])
        position = end + len(closing)
    return found


def single_turn_format(text: str) -> bool:
    r"""``<think>...</think>`` then ``<answer>...</answer>`` and nothing else (ViGoRL's single-turn
    format), as ``re.fullmatch(r"<think>.*?</think>\s*<answer>.*?</answer>", text, re.DOTALL)``
    decides it, in linear time: the two bodies may hold anything, so the text fits when it opens
    with ``<think>``, closes with ``</answer>`` and holds a ``</think>``-whitespace-``<answer>``
    between them."""
    head, tail = "<think>", "</answer>"
    if len(text) < len(head) + len(tail) or not (text.startswith(head) and text.endswith(tail)):
        return False
    return _THINK_THEN_ANSWER.search(text, len(head), len(text) - len(tail)) is not None


def find_coordinates(text: str) -> list[tuple[int, int]]:
    """Integer ``(x, y)`` points in order of appearance."""
    return [(int(x), int(y)) for x, y in COORDINATE.findall(text)]


def coordinate_bonus(unique: int, per_point: float = 0.2, cap: int | None = None) -> float:
    """``per_point`` for every unique point beyond the first (none for zero or one point)."""
    counted = unique if cap is None else min(unique, cap)
    return per_point * max(0, counted - 1)


def _accuracy(mode: AccuracyMode, answer: str | None, reference: Any, scale: float) -> bool:
    if mode == "string":
        return string_match(answer, reference)
    return point_accuracy(answer, reference, scale)


def _text(prediction: Any) -> str | None:
    return prediction if isinstance(prediction, str) and len(prediction) <= MAX_TEXT else None


class GroundedSingleTurnJudge(Judge):
    """``0.5·acc + 0.5·(format·coordinate)`` for one ``<think>`` citing (x, y) points then ``<answer>``.

    ``mode="string"`` (SAT-2, V*) or ``"point_in_box"`` (web grounding, reference ``[x1, y1, x2, y2]``).
    ``min_coordinates`` is 1 as in ViGoRL's code (its docstring says 2)."""

    name = "vigorl/grounded"

    def __init__(self, mode: AccuracyMode = "string", min_coordinates: int = 1, acc_weight: float = 0.5,
                 scale: float = 1.0) -> None:
        if mode not in ("string", "point_in_box"):
            raise ValueError("mode must be 'string' or 'point_in_box'")
        self.mode: AccuracyMode = mode
        self.min_coordinates = min_coordinates
        self.acc_weight = acc_weight
        self.scale = scale

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        text = _text(prediction)
        if text is None:
            return JudgeResult(0.0, {"reason": "prediction is not text (or is too long)"})
        stripped = text.strip()
        for marker in END_MARKERS:
            stripped = stripped.removesuffix(marker).rstrip()
        answers = tag_contents(stripped, "answer")
        answer = answers[-1].strip() if answers else None
        formatted = single_turn_format(stripped) and bool(answer)
        thoughts = tag_contents(stripped, "think")
        points = unique_points(find_coordinates(thoughts[0]), 1.0) if thoughts else []
        grounded = len(points) >= self.min_coordinates
        acc = _accuracy(self.mode, answer, reference, float(context.get("scale", self.scale)))
        value = self.acc_weight * float(acc) + (1 - self.acc_weight) * float(formatted and grounded)
        return JudgeResult(value, {"acc": float(acc), "format": float(formatted), "coordinate": float(grounded),
                                   "answer": answer, "coordinates": len(points)})


@dataclass
class GrammarResult:
    """What the multi-turn grammar machine found."""

    ok: bool
    error: str = ""
    answer: str | None = None
    tool_coordinates: list[tuple[int, int]] = field(default_factory=list)
    turns: int = 0


def _tool_coordinate(raw: str) -> tuple[int, int] | str:
    try:
        call = json.loads(raw.strip())
    except json.JSONDecodeError as exc:
        return f"tool_call is not JSON ({exc.msg})"
    arguments = call.get("arguments") if isinstance(call, dict) else None
    coordinate = arguments.get("coordinate") if isinstance(arguments, dict) else None
    if (not isinstance(coordinate, list) or len(coordinate) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in coordinate)):
        return "tool_call arguments.coordinate must be a list of two integers"
    return coordinate[0], coordinate[1]


# The grammar as transitions: state -> {block tag: next state}.  "done" accepts nothing more.
_TRANSITIONS: dict[str, dict[str, str]] = {
    "start": {"think": "thought"},
    "thought": {"tool_call": "called", "answer": "done"},
    "called": {"observation": "observed"},
    "observed": {"think": "thought"},
    "done": {},
}


def check_multiturn_grammar(text: str) -> GrammarResult:
    """Run ``<think>`` (``<tool_call>`` ``<observation>`` ``<think>``)* ``<answer>`` over the
    transcript.  Text between blocks (chat-template markers, newlines) is allowed; nested or
    unclosed blocks, a block out of order, or anything structural after ``</answer>`` (other than
    whitespace and an end marker) fail."""
    state, position, result = "start", 0, GrammarResult(ok=False)
    while True:
        opening = _TAG.search(text, position)
        if opening is None:
            break
        slash, tag = opening.groups()
        if slash:
            result.error = f"</{tag}> without an opening tag"
            return result
        if tag not in _TRANSITIONS[state]:
            expected = " or ".join(f"<{t}>" for t in _TRANSITIONS[state]) or "nothing"
            result.error = f"<{tag}> where {expected} was expected"
            return result
        closing = _TAG.search(text, opening.end())
        if closing is None or closing.groups() != ("/", tag):
            result.error = f"<{tag}> is not closed before the next tag"
            return result
        body = text[opening.end():closing.start()]
        if tag == "tool_call":
            coordinate = _tool_coordinate(body)
            if isinstance(coordinate, str):
                result.error = coordinate
                return result
            result.tool_coordinates.append(coordinate)
        elif tag == "answer":
            result.answer = body.strip()
        elif tag == "think":
            result.turns += 1
        state, position = _TRANSITIONS[state][tag], closing.end()
        if state == "done":
            tail = text[position:].strip()
            for marker in END_MARKERS:
                tail = tail.replace(marker, "")
            if tail.strip():
                result.error = f"text after </answer>: {tail.strip()[:40]!r}"
                return result
            break
    if state != "done":
        result.error = "the transcript does not end with <answer>…</answer>"
        return result
    if not result.answer:
        result.error = "the answer is empty"
        return result
    result.ok = True
    return result


class GroundedMultiTurnJudge(Judge):
    """``0.6·acc + 0.4·format`` over a whole multi-turn transcript (the assistant turns with the
    ``<observation>`` blocks between them, as one string or a list of strings joined by newlines).

    ``format`` is 0 when the grammar fails, else ``1 + 0.2·(unique tool-call points − 1)`` with
    points unique at ``min_distance`` px, the bonus counted up to ``max_coordinates`` points."""

    name = "vigorl/multiturn"

    def __init__(self, mode: AccuracyMode = "string", acc_weight: float = 0.6, bonus: float = 0.2,
                 min_distance: float = 10.0, max_coordinates: int = 4, scale: float = 1.0) -> None:
        if mode not in ("string", "point_in_box"):
            raise ValueError("mode must be 'string' or 'point_in_box'")
        if max_coordinates < 1:
            raise ValueError("max_coordinates must be at least 1")
        self.mode: AccuracyMode = mode
        self.acc_weight = acc_weight
        self.bonus = bonus
        self.min_distance = min_distance
        self.max_coordinates = max_coordinates
        self.scale = scale
        self.max_score = acc_weight + (1 - acc_weight) * (1 + coordinate_bonus(max_coordinates, bonus))  # type: ignore[misc]

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        if isinstance(prediction, (list, tuple)) and all(isinstance(p, str) for p in prediction):
            prediction = "\n".join(prediction)
        text = _text(prediction)
        if text is None:
            return JudgeResult(0.0, {"reason": "prediction is not text (or is too long)"})
        grammar = check_multiturn_grammar(text)
        unique = unique_points(grammar.tool_coordinates, self.min_distance)
        fmt = 1.0 + coordinate_bonus(len(unique), self.bonus, self.max_coordinates) if grammar.ok else 0.0
        answer = grammar.answer
        if answer is None:
            answers = tag_contents(text, "answer")
            answer = answers[-1].strip() if answers else None
        acc = _accuracy(self.mode, answer, reference, float(context.get("scale", self.scale)))
        value = self.acc_weight * float(acc) + (1 - self.acc_weight) * fmt
        return JudgeResult(value, {"acc": float(acc), "format": fmt, "grammar_error": grammar.error,
                                   "answer": answer, "unique_coordinates": len(unique),
                                   "tool_calls": len(grammar.tool_coordinates)})

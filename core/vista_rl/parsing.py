"""Response parsers for the tag formats VLM agents use.

``<think>``, ``<answer>``, ``<observation>``, ``<reasoning>``, ``<prediction>`` and
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.  Any text, however malformed, gives a
:class:`ParsedResponse` with clear messages; nothing here raises.  Parsing is a single linear scan,
so a megabyte of model output costs milliseconds, not a regex backtracking storm.

Strict mode wants exactly the required tags, each once, properly closed and not nested in
themselves, with nothing but whitespace outside the top-level tags.  Lenient mode recovers what it
can (an unclosed last tag runs to the end of the text, stray text is ignored) and reports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vista_rl.observation import escape_placeholders

KNOWN_TAGS: tuple[str, ...] = ("think", "answer", "observation", "reasoning", "prediction", "tool_call")
_TAG_RE = re.compile(r"<(/?)(" + "|".join(KNOWN_TAGS) + r")>", re.IGNORECASE)
_PREVIEW = 60


@dataclass
class ParsedToolCall:
    name: str | None
    arguments: dict[str, Any] | None
    raw: str
    error: str | None = None


@dataclass
class ParsedResponse:
    """What was found in a response.  ``fields`` maps a tag to its contents in order of appearance."""

    raw: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    format_ok: bool = False
    errors: list[str] = field(default_factory=list)

    def get(self, tag: str) -> str | None:
        """The first content of ``tag`` (stripped), or ``None``."""
        values = self.fields.get(tag)
        return values[0].strip() if values else None

    @property
    def think(self) -> str | None:
        return self.get("think")

    @property
    def answer(self) -> str | None:
        return self.get("answer")

    @property
    def observation(self) -> str | None:
        return self.get("observation")

    @property
    def reasoning(self) -> str | None:
        return self.get("reasoning")

    @property
    def prediction(self) -> str | None:
        return self.get("prediction")

    @property
    def feedback(self) -> str:
        """One message for the model saying what was wrong (empty when the format was fine)."""
        if self.format_ok:
            return ""
        return "Invalid response format: " + "; ".join(self.errors or ["required tags are missing"]) + "."


@dataclass(frozen=True)
class ResponseFormat:
    """Which tags a response must contain.  ``answer_or_tool_call`` accepts either an answer or at
    least one tool call (tool-using envs)."""

    required: tuple[str, ...] = ("answer",)
    answer_or_tool_call: bool = False
    strict: bool = False


def _preview(text: str) -> str:
    """A short quote of model text for an error message.  ``<image>`` is escaped: envs put these
    messages into observations, where a quoted placeholder would claim an image that is not there."""
    text = escape_placeholders(text.replace("\n", " "))
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


def _loads(text: str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: ``(value, None)`` or ``(None, reason)``.

    Beyond ``JSONDecodeError``, model output can trip Python's own limits: an integer of more than
    4,300 digits is a plain ``ValueError`` and deep nesting a ``RecursionError``; both are bad
    JSON as far as the model is concerned.
    """
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return None, f"{exc.__class__.__name__}: {getattr(exc, 'msg', exc)}"


def _parse_tool_call(raw: str) -> ParsedToolCall:
    text = raw.strip()
    payload, problem = _loads(text)
    if problem is not None:
        return ParsedToolCall(None, None, raw, f"tool call is not valid JSON ({_preview(problem)}): {_preview(text)!r}")
    if not isinstance(payload, dict):
        return ParsedToolCall(None, None, raw, 'tool call must be a JSON object like {"name": ..., "arguments": {...}}')
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return ParsedToolCall(None, None, raw, 'tool call needs a string "name"')
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):  # some models double-encode the arguments
        arguments, problem = _loads(arguments) if arguments.strip() else ({}, None)
        if problem is not None:
            return ParsedToolCall(name, None, raw, f'"arguments" of {name} is a string that is not JSON')
    if not isinstance(arguments, dict):
        return ParsedToolCall(name, None, raw, f'"arguments" of {name} must be a JSON object')
    return ParsedToolCall(name, arguments, raw)


def parse_response(text: object, response_format: ResponseFormat | None = None) -> ParsedResponse:
    """Parse ``text`` against ``response_format``; never raises."""
    fmt = response_format or ResponseFormat()
    if not isinstance(text, str):
        try:
            text = "" if text is None else str(text)
        except Exception:  # noqa: BLE001 - an object whose __str__ fails is just unreadable output
            text = ""
    result = ParsedResponse(raw=text)
    errors: list[str] = []
    stack: list[tuple[str, int, int]] = []  # (tag, start of tag, start of content)
    outside_text: list[str] = []
    cursor = 0
    for match in _TAG_RE.finditer(text):
        closing, tag = match.group(1) == "/", match.group(2).lower()
        if not stack and match.start() > cursor:
            outside_text.append(text[cursor:match.start()])
        if not closing:
            if any(open_tag == tag for open_tag, _, _ in stack):
                errors.append(f"<{tag}> is opened again inside <{tag}>")
                continue
            stack.append((tag, match.start(), match.end()))
        else:
            if not stack or all(open_tag != tag for open_tag, _, _ in stack):
                errors.append(f"</{tag}> closes a tag that was never opened")
                cursor = match.end()
                continue
            while stack and stack[-1][0] != tag:  # close tags left open inside this one
                inner, _, inner_start = stack.pop()
                errors.append(f"<{inner}> is not closed before </{tag}>")
                result.fields.setdefault(inner, []).append(text[inner_start:match.start()])
            _, _, content_start = stack.pop()
            result.fields.setdefault(tag, []).append(text[content_start:match.start()])
        cursor = match.end()
    if not stack and cursor < len(text):
        outside_text.append(text[cursor:])
    while stack:  # unclosed tags run to the end of the text (lenient recovery)
        tag, _, content_start = stack.pop()
        errors.append(f"<{tag}> is never closed")
        result.fields.setdefault(tag, []).append(text[content_start:])

    tool_errors: list[str] = []
    for raw_call in result.fields.pop("tool_call", []):
        call = _parse_tool_call(raw_call)
        result.tool_calls.append(call)
        if call.error:
            tool_errors.append(call.error)

    # "missing" errors decide format_ok in lenient mode; every error decides it in strict mode.
    missing: list[str] = []
    if "<answer> is opened again inside <answer>" in errors:
        # Two answers, one inside the other ("<answer>B<answer>A</answer>B</answer>"): no reading
        # of it is the model's answer, and a lenient one let a hedge pass as the right option.
        missing.append("<answer> holds another <answer>: give one answer")
    has_valid_tool_call = any(call.error is None for call in result.tool_calls)
    for tag in fmt.required:
        values = result.fields.get(tag, [])
        if tag == "answer" and fmt.answer_or_tool_call and has_valid_tool_call:
            continue
        if not values:
            missing.append(f"missing <{tag}>...</{tag}>")
        elif not any(value.strip() for value in values):
            missing.append(f"<{tag}> is empty")
        elif fmt.strict and len(values) > 1:
            errors.append(f"<{tag}> appears {len(values)} times; expected once")
    if not text.strip():
        missing.insert(0, "the response is empty")

    stray = "".join(outside_text).strip()
    if fmt.strict and stray:
        errors.append(f"text outside the tags: {_preview(stray)!r}")

    result.errors = list(dict.fromkeys(missing + errors + tool_errors))
    result.format_ok = not result.errors if fmt.strict else not missing
    return result


def split_actions(answer: str | None, separator: str = ",", max_actions: int | None = None) -> list[str]:
    """Split an answer like ``"Up, Left"`` into actions, dropping empty pieces."""
    if not answer:
        return []
    actions = [piece.strip() for piece in answer.split(separator) if piece.strip()]
    return actions[:max_actions] if max_actions is not None else actions


def format_tags(required: Sequence[str]) -> str:
    """``("think", "answer")`` -> ``"<think>...</think><answer>...</answer>"`` for prompts."""
    return "".join(f"<{tag}>...</{tag}>" for tag in required)

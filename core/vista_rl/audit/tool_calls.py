"""Tool calls for adversarial replies: the oracle's own call with its coordinates moved around.

Spam adversaries need calls an env will take for real: the right tool name and well-formed
arguments.  The best template is the call the env's oracle makes (it is what the env expects); an env
whose oracle never calls a tool gets one built from the tool's argument schema.  Every list of two
numbers in the arguments is read as a point and every list of four as a box, and both are moved to
the point the adversary wants (inside the image, off it, or the same one again).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Points this far apart (pixels) count as distinct for the grounding rewards (ViGoRL uses 10).
POINT_SPACING = 12


@dataclass(frozen=True)
class ToolTemplate:
    """A tool call to vary: the tool's name and arguments the env accepts."""

    name: str
    arguments: Mapping[str, Any]

    def at(self, point: tuple[int, int]) -> str:
        """This call moved to ``point``, as ``<tool_call>...</tool_call>`` text."""
        return call_text(self.name, move_to(dict(self.arguments), point))


def call_text(name: str, arguments: Any) -> str:
    """One call in the reply format every parser reads."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _is_numbers(value: Any, length: int) -> bool:
    return (isinstance(value, list) and len(value) == length
            and all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value))


def move_to(arguments: dict[str, Any], point: tuple[int, int]) -> dict[str, Any]:
    """A copy of ``arguments`` whose points (two numbers) become ``point`` and whose boxes (four)
    become a small box around it; other values are kept."""
    x, y = point

    def moved(value: Any) -> Any:
        if _is_numbers(value, 2):
            return [x, y]
        if _is_numbers(value, 4):
            return [x - 8, y - 8, x + 8, y + 8]
        if isinstance(value, dict):
            return {key: moved(item) for key, item in value.items()}
        return copy.deepcopy(value)

    return {key: moved(value) for key, value in arguments.items()}


def schema_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool with this JSON schema (``Tool.Arguments.model_json_schema()``): every
    required property filled with a plain value of its type, so the call validates."""
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        arguments[name] = _example(spec)
    return arguments


def _example(spec: Mapping[str, Any]) -> Any:
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "array":
        length = int(spec.get("minItems") or 2)
        return [_example(spec.get("items") or {"type": "integer"}) for _ in range(length)]
    if kind == "integer":
        return max(int(spec.get("minimum", 0)), 0)
    if kind == "number":
        return float(max(spec.get("minimum", 1.0), 0.0))
    if kind == "boolean":
        return False
    if kind == "object":
        return {}
    return "x"


def points_inside(size: tuple[int, int], count: int) -> list[tuple[int, int]]:
    """Up to ``count`` distinct points inside a ``size`` image, at least :data:`POINT_SPACING` apart
    where the image allows (a tiny image gives fewer)."""
    width, height = max(int(size[0]), 1), max(int(size[1]), 1)
    columns = max(1, min(math.ceil(math.sqrt(count)), width // POINT_SPACING or 1))
    rows = max(1, min(math.ceil(count / columns), height // POINT_SPACING or 1))
    step_x, step_y = width / columns, height / rows
    points = [(int(step_x * (c + 0.5)), int(step_y * (r + 0.5))) for r in range(rows) for c in range(columns)]
    return points[:count]


def points_outside(size: tuple[int, int], count: int) -> list[tuple[int, int]]:
    """``count`` distinct points off a ``size`` image: right of it, below it and at negative
    coordinates, in turn."""
    width, height = int(size[0]), int(size[1])
    points: list[tuple[int, int]] = []
    for index in range(count):
        offset = POINT_SPACING * (index // 3 + 1)
        points.append([(width + offset, height // 2), (width // 2, height + offset), (-offset, -offset)][index % 3])
    return points


def errored_calls(template: ToolTemplate, points: list[tuple[int, int]]) -> list[str]:
    """Calls that fail, each naming a distinct place: the template moved to each point with an
    argument the tool does not take (so validation refuses it), then an unknown tool, broken JSON
    and arguments that are no object.  An env must not count any of them."""
    calls = [call_text(template.name, {**move_to(dict(template.arguments), point), "not_an_argument": 1})
             for point in points]
    return [*calls, call_text("no_such_tool", {"coordinate": [1, 1]}),
            '<tool_call>{"name": "' + template.name + '", "arguments": {"coordinate": [1, </tool_call>',
            call_text(template.name, [1, 2])]

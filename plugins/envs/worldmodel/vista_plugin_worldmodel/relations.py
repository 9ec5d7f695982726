"""Reading a model's ``<observation>`` / ``<prediction>`` text into VAGEN's relation form.

The grid games put the true state in ``info`` as a list of
``{"object_id", "vertical_relation", "horizontal_relation"}`` (each object relative to the player:
``above``/``below``/``same`` and ``left``/``right``/``same``).  To score free text against it without
a model, this module reads the text back into the same form:

- a JSON list of such dicts (VAGEN's ``*_structured`` formats) is taken as is;
- otherwise each sentence (or ``;``/line-separated clause) that names objects and directions gives one
  relation per object named: "The box is 1 row below and 2 columns to the left of the player",
  "the goal is above me", "holes: left", "The player is below the target" (subject and object swapped,
  so the target is *above*);
- an axis the clause does not mention is ``same`` ("directly below" is below, same column), as the
  envs' own descriptions write it.

Distances are ignored: VAGEN's relation form has none.  Anything that cannot be read gives fewer
relations (a malformed text scores low); nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

Relation = dict[str, str]
VERTICAL = ("above", "below", "same")
HORIZONTAL = ("left", "right", "same")
MAX_TEXT_CHARS = 20_000  # longer texts are cut: a reward must not cost a quadratic scan of a megabyte

#: Words that name an object, by canonical object id.  Users may pass their own (``synonyms=``).
DEFAULT_SYNONYMS: dict[str, tuple[str, ...]] = {
    "target": ("target", "targets", "goal", "goals", "gift", "gifts", "flag", "destination", "storage spot",
               "storage spots", "dock", "docks"),
    "box": ("box", "boxes", "crate", "crates"),
    "hole": ("hole", "holes", "pit", "pits"),
}
_PLAYER = r"\b(?:player|agent|me|i|myself|elf|character)\b"
_ABOVE = r"\b(?:above|up|upper|over|north|higher)\b"
_BELOW = r"\b(?:below|down|lower|under|underneath|beneath|south)\b"
_LEFT = r"\b(?:left|west)\b"
_RIGHT = r"\b(?:right|east)\b"
_SAME_ROW = r"\bsame (?:row|horizontal line|line|level|height)\b|\blevel with\b|\bhorizontally aligned\b"
_SAME_COL = r"\bsame (?:column|vertical line|col)\b|\bvertically aligned\b"
_SAME_CELL = r"\bsame (?:cell|position|place|square|tile|spot)\b|\bon top of\b|\bstanding on\b"
#: "right below me", "right now": ``right`` as an intensifier is no direction.
_INTENSIFIER = re.compile(r"\bright (?=(?:below|above|under|underneath|beneath|over|next|beside|behind|here|there|now|"
                          r"away|in front)\b)")
_CLAUSES = re.compile(r"(?<=[.!?])\s+|[;\n]+")
_SUBCLAUSES = re.compile(r",\s*(?:and\s+|while\s+|but\s+)?(?=(?:the|a|an)\b)|\s+(?:and|while|but|whereas)\s+(?=(?:the|a|an)\b)")


def _compile(synonyms: Mapping[str, Iterable[str]]) -> list[tuple[str, re.Pattern[str]]]:
    patterns = []
    for object_id, words in synonyms.items():
        alternatives = "|".join(re.escape(word) for word in sorted(set(words) | {object_id}, key=len, reverse=True))
        patterns.append((object_id, re.compile(rf"\b(?:{alternatives})\b")))
    return patterns


_DEFAULT_PATTERNS = _compile(DEFAULT_SYNONYMS)


def normalize_relations(value: Any) -> list[Relation] | None:
    """A relation list in canonical form (lower-case ids, known relation words), or ``None`` when
    ``value`` is not one.  Accepts a list of dicts or its JSON text; unknown relation words are
    dropped item by item."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, Mapping) and isinstance(value.get("objects"), list):
        value = value["objects"]
    if not isinstance(value, list):
        return None
    out: list[Relation] = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        object_id = str(item.get("object_id", "")).strip().lower()
        vertical = _canonical(item.get("vertical_relation"), VERTICAL)
        horizontal = _canonical(item.get("horizontal_relation"), HORIZONTAL)
        if object_id and vertical and horizontal:
            out.append({"object_id": object_id, "vertical_relation": vertical, "horizontal_relation": horizontal})
    return out


def _canonical(word: Any, allowed: tuple[str, ...]) -> str | None:
    text = str(word or "").strip().lower()
    for candidate in allowed:
        if text == candidate or text.startswith(candidate):
            return candidate
    if text in ("up", "upper", "north"):
        return "above"
    if text in ("down", "lower", "south"):
        return "below"
    if text in ("none", "same row", "same column", "aligned", "center", "centre"):
        return "same"
    return None


def _json_candidate(text: str) -> list[Relation] | None:
    start = text.find("[")
    end = text.rfind("]")
    if start < 0 or end <= start:
        return None
    return normalize_relations(text[start:end + 1]) or None


def _first(pattern: str, clause: str) -> int:
    match = re.search(pattern, clause)
    return match.start() if match else -1


def _clause_relation(clause: str) -> tuple[str, str] | None:
    """(vertical, horizontal) that one clause states, or ``None`` when it states no direction."""
    if re.search(_SAME_CELL, clause):
        return "same", "same"
    above, below = _first(_ABOVE, clause) >= 0, _first(_BELOW, clause) >= 0
    left, right = _first(_LEFT, clause) >= 0, _first(_RIGHT, clause) >= 0
    same_row, same_col = bool(re.search(_SAME_ROW, clause)), bool(re.search(_SAME_COL, clause))
    vertical = "above" if above and not below else "below" if below and not above else "same" if same_row else None
    horizontal = "left" if left and not right else "right" if right and not left else "same" if same_col else None
    if vertical is None and horizontal is None:
        return None
    return vertical or "same", horizontal or "same"


_FLIP = {"above": "below", "below": "above", "left": "right", "right": "left", "same": "same"}


def parse_relations(text: Any, synonyms: Mapping[str, Iterable[str]] | None = None) -> list[Relation]:
    """Read ``text`` (see the module docstring) into relations; ``[]`` when nothing can be read."""
    if isinstance(text, (list, Mapping)):
        return normalize_relations(text) or []
    if not isinstance(text, str) or not text.strip():
        return []
    text = _INTENSIFIER.sub("", text[:MAX_TEXT_CHARS].lower())
    structured = _json_candidate(text)
    if structured:
        return structured
    patterns = _DEFAULT_PATTERNS if synonyms is None else _compile(synonyms)
    out: list[Relation] = []
    for sentence in _CLAUSES.split(text):
        waiting: list[str] = []  # "The box and the target are below": objects before the direction
        for clause in _SUBCLAUSES.split(sentence):
            named = sorted((match.start(), object_id) for object_id, pattern in patterns
                           for match in pattern.finditer(clause))
            relation = _clause_relation(clause)
            if relation is None:
                waiting.extend(_distinct_mentions(clause, named))
                continue
            if not named and not waiting:
                continue
            vertical, horizontal = relation
            player = re.search(_PLAYER, clause)
            # "The player is below the box": the player is the subject, so the box is above it.
            if (named and player is not None and player.start() < named[0][0]
                    and _direction_between(clause, player.end(), named[0][0])):
                vertical, horizontal = _FLIP[vertical], _FLIP[horizontal]
            for object_id in waiting + _distinct_mentions(clause, named):
                out.append({"object_id": object_id, "vertical_relation": vertical, "horizontal_relation": horizontal})
            waiting = []
    return out


def _direction_between(clause: str, start: int, end: int) -> bool:
    between = clause[start:end]
    return any(re.search(pattern, between) for pattern in (_ABOVE, _BELOW, _LEFT, _RIGHT, _SAME_ROW, _SAME_COL,
                                                           _SAME_CELL))


_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "both": 2}


def _distinct_mentions(clause: str, named: list[tuple[int, str]]) -> list[str]:
    """One entry per object mentioned, repeated for "two holes" / "3 boxes" (capped at 5)."""
    out: list[str] = []
    seen: set[str] = set()
    for position, object_id in named:
        if object_id in seen:
            continue
        seen.add(object_id)
        before = clause[max(0, position - 12):position].split()
        count = 1
        if before:
            word = before[-1]
            count = int(word) if word.isdigit() else _NUMBER_WORDS.get(word, 1)
        out.extend([object_id] * max(1, min(count, 5)))
    return out


def describe_relations(relations: Iterable[Mapping[str, str]]) -> str:
    """The relations as plain sentences (the truth an LLM judge compares a description with)."""
    lines = []
    for item in relations:
        vertical, horizontal = item.get("vertical_relation", "?"), item.get("horizontal_relation", "?")
        if vertical == "same" and horizontal == "same":
            where = "at the same cell as the player"
        elif horizontal == "same":
            where = f"{vertical} the player, in the same column"
        elif vertical == "same":
            where = f"to the {horizontal} of the player, in the same row"
        else:
            where = f"{vertical} and to the {horizontal} of the player"
        lines.append(f"- {item.get('object_id', '?')}: {where}")
    return "\n".join(lines) if lines else "(no objects)"

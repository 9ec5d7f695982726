"""What the episode driver says about a finished episode, as one typed record.

:class:`EpisodeStats` is serialised flat under ``Trajectory.metadata`` (the keys every run directory
has always had: ``stop_reason``, ``attempts``, ``tool_calls``, ...), so old run directories read back
and a JSON reader needs nothing new.  Code reads it with :meth:`EpisodeStats.from_metadata` rather than
by string key, so a renamed or retyped field is a type error in one place, not a silent ``.get`` default
in five.  A key an older run lacks reads back as the field's default; a value of the wrong kind is an
error naming the key.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class EpisodeStats:
    """One episode's record.

    ``episode_index`` orders a stream's episodes; ``group_id`` groups a seed's samples (GRPO);
    ``stop_reason`` says why the episode ended (``done``, ``max_turns``, ``env_error``, ...; ``None`` on
    a record written before it ended, e.g. by a lost model worker); ``cut_off`` is true when a limit the
    env did not choose (``rollout.max_turns`` below its ``turn_limit()``, a token budget) ended it;
    ``first_attempt_success`` is the success of the first attempt under reflection."""

    episode_index: int | None = None
    group_id: str | None = None
    stop_reason: str | None = None
    attempts: int = 1
    generated_tokens: int = 0
    tokens_estimated: bool = False
    context_tokens: int = 0
    format_errors: int = 0
    env_steps: int = 0
    tool_calls: int = 0
    turn_limit: int | None = None
    env_turn_limit: int | None = None
    cut_off: bool = False
    first_attempt_success: bool | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The flat metadata keys, in field order (a trajectory's metadata keeps its first key order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> EpisodeStats:
        """Read the record back from a trajectory's metadata (keys an older run lacks get defaults)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in metadata and metadata[f.name] is not None:
                values[f.name] = _typed(f.name, metadata[f.name], _KINDS[f.name])
        return cls(**values)


_KINDS: dict[str, type] = {
    "episode_index": int, "group_id": str, "stop_reason": str, "attempts": int, "generated_tokens": int,
    "tokens_estimated": bool, "context_tokens": int, "format_errors": int, "env_steps": int, "tool_calls": int,
    "turn_limit": int, "env_turn_limit": int, "cut_off": bool, "first_attempt_success": bool,
}


def _typed(name: str, value: Any, kind: type) -> Any:
    """``value`` as ``kind``: an integer, a bool or a string as written, never coerced from another kind
    (a count written as ``true`` or ``"3"`` is a broken record, not a number)."""
    if kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if kind is bool and isinstance(value, bool):
        return value
    if kind is str and isinstance(value, str):
        return value
    raise ValueError(f"trajectory metadata {name!r} should be {kind.__name__}, got {type(value).__name__}: "
                     f"{value!r}")

"""What ``POST /observe`` may hand a session's env: per call, per item and per episode.

``/observe`` passes a tool turn the client's rollout engine ran to ``Env.observe_tool_turn``, and an
env keeps what it is shown until its next reset (``ToolQAEnv`` keeps every call's arguments and a
parse of every response, for rewards over the whole chain).  ``/step`` is bounded by the env's own
turn limit; ``/observe`` is not a turn, so before these limits nothing bounded it: eight requests
whose one call held a 7M-element list grew a server by 430 MB for the session's life, and 12,000
zoom points all reached the grounded reward.  Before an env sees an item, this module checks:

- **per call**: ``arguments`` are JSON values (string keys; no bytes or msgpack extension types),
  nest at most ``max_argument_depth`` levels and hold at most ``max_argument_bytes``; a tool name is
  at most ``max_name_chars`` characters;
- **per item**: the response and each result text at most ``max_text_chars`` characters (the
  request schema already caps an item at 64 calls);
- **per episode** (from one ``/reset`` of the session to the next): at most ``max_turns_per_episode``
  items, ``max_calls_per_episode`` calls and ``max_bytes_per_episode`` bytes in all.  This is the
  bound on what one session holds from ``/observe``, what the env builds from it included: a
  response is charged twice its size (the env keeps it and the tag contents cut from it) plus
  :data:`PARSED_VALUE_BYTES` for every JSON value it could parse into (``ToolQAEnv`` parses the
  ``<tool_call>`` JSON in each response, and 64K characters of ``[{},{},...]`` parse into 1.5 MB),
  and each call and turn a fixed overhead for the env's records of it.

An item past any limit is refused whole (the env sees none of it) with an item error that names the
limit; the other items of the batch still run.  Sizes are Python memory (``sys.getsizeof`` of every
object, walked iteratively and stopped once past the limit), i.e. what the env would keep, not wire
bytes: one msgpack byte can decode into a 64-byte dict.  The whole request is already bounded by the
server's body limit (``--max-body-mb``) and its nesting limit (32 levels).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vista_plugin_envserver.limits import LimitError
from vista_rl.limits import json_values_bound
from vista_rl.serving import short

#: charged for each JSON value a response could parse into: a dict costs 72 bytes once parsed, a key
#: and its value about 90, and a ``<tool_call>`` about 800 for its 5 values with the parser's record
#: of it (``ToolQAEnv`` measured at most 0.71 of the charge for responses built to parse into the most)
PARSED_VALUE_BYTES = 160
#: charged per observed call and per observed turn for the env's own record of it
CALL_OVERHEAD_BYTES = 256
TURN_OVERHEAD_BYTES = 512


class ObservedCall(Protocol):
    """The fields of a tool call these limits look at (``ToolCallItem`` and ``ToolCallRecord`` both fit)."""

    name: str
    arguments: Any
    result_text: str


@dataclass
class ObserveUsage:
    """What one session has taken through ``/observe`` since its last reset."""

    turns: int = 0
    calls: int = 0
    bytes: int = 0

    def clear(self) -> None:
        """A new episode (the env's reset drops what it was shown)."""
        self.turns = self.calls = self.bytes = 0


def held_bytes(value: Any, limit: int, max_depth: int, what: str) -> int:
    """The Python memory ``value`` holds (every list, map, string and number, counted once per
    reference), checked to be JSON data nested at most ``max_depth`` levels (as
    ``vista_rl.serving.nesting_depth`` counts them).  Raises :class:`LimitError` (422 for a shape,
    413 for a size) as soon as a limit is passed, so a 7M-element list costs one ``getsizeof``."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise LimitError(422, f"{what} nests deeper than {max_depth} levels")
        if item is None or isinstance(item, bool):
            continue  # singletons: the container's pointer is already counted
        if isinstance(item, (int, float, str)):
            total += sys.getsizeof(item)
        elif isinstance(item, dict):
            total += sys.getsizeof(item)
            if total <= limit:
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise LimitError(422, f"{what} has a map key {short(key)}; keys must be strings")
                    stack.append((key, depth + 1))
                    stack.append((child, depth + 1))
        elif isinstance(item, list):
            total += sys.getsizeof(item)
            if total <= limit:
                stack.extend((child, depth + 1) for child in item)
        else:
            raise LimitError(422, f"{what} holds a {type(item).__name__}, not a JSON value")
        if total > limit:
            raise LimitError(413, f"{what} holds more than {limit:,} bytes (this server's limit)")
    return total


@dataclass(frozen=True)
class ObserveLimits:
    """The server's limits on ``/observe`` (see the module docstring)."""

    max_argument_bytes: int = 16 * 1024
    max_argument_depth: int = 8
    max_name_chars: int = 256
    max_text_chars: int = 64 * 1024
    max_turns_per_episode: int = 64
    max_calls_per_episode: int = 256
    max_bytes_per_episode: int = 4 * 1024 * 1024

    def item_bytes(self, response: str, calls: Sequence[ObservedCall]) -> int:
        """The memory one item holds, after checking each call and text against the per-call and
        per-item limits (raises :class:`LimitError`)."""
        total = TURN_OVERHEAD_BYTES + response_bytes(self._checked_text(response, "the response"))
        for index, call in enumerate(calls):
            if not isinstance(call.name, str) or len(call.name) > self.max_name_chars:
                raise LimitError(422, f"call {index}'s tool name is not a string of at most "
                                      f"{self.max_name_chars} characters")
            result_text = self._checked_text(call.result_text, f"call {index}'s result_text")
            total += CALL_OVERHEAD_BYTES + sys.getsizeof(call.name) + sys.getsizeof(result_text)
            total += held_bytes(call.arguments, self.max_argument_bytes, self.max_argument_depth,
                                f"call {index} ({short(call.name, 40)})'s arguments")
        return total

    def admit(self, usage: ObserveUsage, response: str, calls: Sequence[ObservedCall]) -> None:
        """Charge one item to a session's ``usage``, or raise :class:`LimitError` (and charge
        nothing) when it passes a per-call, per-item or per-episode limit."""
        size = self.item_bytes(response, calls)
        if usage.turns + 1 > self.max_turns_per_episode:
            raise LimitError(429, f"this session was shown {usage.turns} tool turns this episode, the server's "
                                  f"limit per episode; reset the session for a new episode")
        if usage.calls + len(calls) > self.max_calls_per_episode:
            raise LimitError(429, f"{len(calls)} more tool calls would pass this server's limit of "
                                  f"{self.max_calls_per_episode} per episode ({usage.calls} so far)")
        if usage.bytes + size > self.max_bytes_per_episode:
            raise LimitError(413, f"this turn's {size:,} bytes would pass this server's limit of "
                                  f"{self.max_bytes_per_episode:,} bytes per session per episode "
                                  f"({usage.bytes:,} so far)")
        usage.turns += 1
        usage.calls += len(calls)
        usage.bytes += size

    def _checked_text(self, text: Any, what: str) -> str:
        if not isinstance(text, str):
            raise LimitError(422, f"{what} must be a string, got {type(text).__name__}")
        if len(text) > self.max_text_chars:
            raise LimitError(413, f"{what} holds {len(text):,} characters, over this server's limit of "
                                  f"{self.max_text_chars:,}")
        return text


def response_bytes(text: str) -> int:
    """What keeping a response and a parse of it may cost an env (see the module docstring): twice
    the text, plus :data:`PARSED_VALUE_BYTES` for each JSON value it could hold
    (``vista_rl.limits.json_values_bound``)."""
    return 2 * sys.getsizeof(text) + PARSED_VALUE_BYTES * json_values_bound(text.encode("utf-8", "surrogatepass"))

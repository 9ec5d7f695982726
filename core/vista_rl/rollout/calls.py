"""The blocking calls an episode needs, as data, and how each one ended.

:class:`~vista_rl.rollout.episode.EpisodeDriver` does no I/O: it returns a :class:`Call` for each env
or tool call it needs (make and reset the env, ``step``, a tool, ``observe_tool_turn``, a reflection
reset, an env-drawn reply, ``close``) and takes a :class:`CallOutcome` for each back.  Whoever drives
it decides how the calls run: :class:`~vista_rl.rollout.RolloutEngine` on its thread pool with the
timeouts, the verl agent loop awaited on asyncio, a unit test by calling ``fn`` itself or by handing
in a timeout it never waited for.  So the episode's rules are testable without a thread, and an
engine's way of waiting is its own.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class CallKind(enum.Enum):
    """What a :class:`Call` does (an engine may count or schedule by kind)."""

    OPEN = "open"  # make the env, reset it, read its prompt, tools and turn limit (``open_env``)
    STEP = "step"  # ``env.step(reply)``
    TOOL = "tool"  # one tool call
    OBSERVE = "observe"  # ``env.observe_tool_turn(reply, records)``
    RESET = "reset"  # the reflection reset to the same seed
    ORACLE = "oracle"  # a reply drawn from the env, for a backend that needs one
    CLOSE = "close"  # ``env.close()``: nobody waits on it (``timeout_s`` is ``None``)


@dataclass(frozen=True)
class Call:
    """One blocking call: ``fn(*args)``, to be given up after ``timeout_s`` seconds of running.

    ``label`` names the call in a failure reason (``"env.step()"``, ``"tool zoom"``)."""

    kind: CallKind
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    timeout_s: float | None
    label: str


@dataclass(frozen=True)
class CallOutcome:
    """How one call ended: a value, an exception, or a timeout (then ``value`` is ``None``)."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out

    def describe(self, what: str, timeout: float | None) -> str:
        """A one-line reason for a trajectory's ``failure`` field."""
        if self.timed_out:
            return f"{what} timed out after {timeout or 0.0:g}s"
        if self.error is not None:
            return f"{what} raised {type(self.error).__name__}: {self.error}"
        return f"{what} succeeded"


def run_here(call: Call) -> CallOutcome:
    """Run ``call`` in this thread, without a timeout (a caller that cannot hang, or a test)."""
    try:
        return CallOutcome(call.fn(*call.args))
    except Exception as exc:  # noqa: BLE001 - every failure is an outcome, as on a pool
        return CallOutcome(error=exc)

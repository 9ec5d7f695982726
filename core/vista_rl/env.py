"""The environment contract.

An Env takes the model's *raw text* as its action: parsing (with the core's parsers) belongs to the
env because only the env knows its answer format, and a malformed response must become feedback, not
an exception.
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vista_rl.observation import Observation
from vista_rl.trajectory import ToolCallRecord


@dataclass
class StepResult:
    """The outcome of one ``Env.step``."""

    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def __post_init__(self) -> None:
        self.reward = float(self.reward)
        if not math.isfinite(self.reward):
            raise ValueError(f"step reward must be finite, got {self.reward}")


def episode_seed(seed: object, default: int = 0) -> int:
    """``seed`` as the int an env draws its episode from; ``None`` gives ``default``.

    ``int(seed)`` would silently play seed 1 for ``1.5`` (and seed 1 for ``True``), so two runs that
    asked for different seeds would share episodes without a word.  Whole numbers pass (NumPy ints,
    and floats like ``3.0`` that JSON round trips produce); anything else is a clear ``ValueError``.
    """
    if seed is None:
        return default
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    if isinstance(seed, float) and seed.is_integer():
        return int(seed)
    raise ValueError(f"seed must be a whole number, got {seed!r}")


#: How :func:`action_reply` phrases a declared action for an env without ``action_response``.
DEFAULT_ACTION_REPLY = "<answer>{}</answer>"


class Env(abc.ABC):
    """Base class of every VISTA environment.

    Subclasses implement :meth:`reset` and :meth:`step`; the same seed must give the same episode on
    any machine and in any process.  ``info`` should carry ``success``, ``format_ok`` and
    ``action_valid`` where they apply, and ground-truth state for judges where the env can.
    """

    #: Ids of registered tools this env lets the model call (resolved by the rollout engine).
    tools: tuple[str, ...] = ()

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start an episode; deterministic for a given seed."""

    @abc.abstractmethod
    def step(self, action: str) -> StepResult:
        """Apply the model's raw response text."""

    def system_prompt(self) -> str:
        """Rules, action names, response format and an example."""
        return ""

    def oracle_response(self) -> str | None:
        """A correct response for the current state, when the env can compute one (for scripted
        baselines, SFT data and tests).  ``None`` means the env has no oracle."""
        return None

    def turn_limit(self) -> int | None:
        """The most model turns an episode of this env takes: the env ends (truncates) every episode
        by then, so a run that sets no ``rollout.max_turns`` plays this many (``vista eval``,
        ``vista train``, :func:`vista_rl.evaluate`, :func:`vista_rl.train`).  ``None``: the env sets
        no limit, and the run config's (default 5) applies; episodes it cuts off are counted as cut
        off (``cut_off_episodes`` in an eval's metrics), since the env did not choose that end.

        The default reads ``self.config.max_turns`` when the env keeps a config with that field (the
        VQA, grounding and SVG envs do); an env whose limit is counted otherwise (the grid games'
        ``max_steps``) overrides this."""
        limit = getattr(getattr(self, "config", None), "max_turns", None)
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
            return limit
        return None

    def tool_context_metadata(self) -> dict[str, Any]:
        """Extra ``ToolContext.metadata`` for tool calls in this episode.  An env that shows the
        model a downscaled image puts the original here (``{"full_resolution": {0: image}}``) so
        crop/zoom tools cut from the real pixels."""
        return {}

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        """See a reply the rollout engine answered by running tools, not by calling :meth:`step`.

        When the engine runs the env's tools, a reply with a ``<tool_call>`` never reaches ``step``;
        the engine calls this instead, after the calls ran, with the reply's raw text and one record
        per call (name, arguments, result text, image count, whether it failed).  An env whose reward
        depends on the whole reasoning chain (points cited in every turn's ``<think>`` and tool
        coordinates, a tool budget) records them here.  It is not an action: it must not judge an
        answer, end the episode or count a turn.  The default ignores it.  Raising (or hanging past
        the env timeout) fails the episode, like ``step``.
        """

    def close(self) -> None:
        """Release resources.  Must be safe to call twice."""

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EnvWrapper(Env):
    """An env around another env, as gymnasium's ``Wrapper``: every method and ``tools`` go to
    ``inner``, so a subclass overrides only what it changes (the blank-images ablation its
    observations, the state reward its step reward) and stays whole when :class:`Env` gains a method.

    An attribute the wrapper lacks is read from ``inner`` (an env's ``action_names`` or ``config``),
    so code that asks a wrapped env what it offers gets the answer of the env at the bottom
    (:attr:`unwrapped`).  Private names are not forwarded.
    """

    def __init__(self, inner: Env) -> None:
        self.inner = inner
        self.tools = inner.tools

    @property
    def unwrapped(self) -> Env:
        """The env under every wrapper."""
        env = self.inner
        while isinstance(env, EnvWrapper):
            env = env.inner
        return env

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return self.inner.reset(seed=seed)

    def step(self, action: str) -> StepResult:
        return self.inner.step(action)

    def system_prompt(self) -> str:
        return self.inner.system_prompt()

    def oracle_response(self) -> str | None:
        return self.inner.oracle_response()

    def turn_limit(self) -> int | None:
        return self.inner.turn_limit()

    def tool_context_metadata(self) -> dict[str, Any]:
        return self.inner.tool_context_metadata()

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        self.inner.observe_tool_turn(response, calls)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails; "inner" itself is refused so a half-built wrapper
        # (during unpickling or before __init__) raises AttributeError instead of recursing.
        if name.startswith("_") or name == "inner":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.inner, name)


def declared_actions(env: Env) -> list[str]:
    """The action names an env declares (``env.action_names``, a sequence of strings), or ``[]``:
    what blind and random baselines choose among."""
    names = getattr(env, "action_names", None)
    if isinstance(names, str) or not isinstance(names, Sequence):
        return []
    return [name for name in names if isinstance(name, str)]


def action_reply(env: Env, action: str) -> str:
    """A reply that takes the declared ``action`` in the env's own reply format.

    An env whose replies need more than ``<answer>ACTION</answer>`` (think tags, a prompt format with
    ``<observation>``/``<prediction>``) says how with an ``action_response(name) -> str`` method, which
    ``vista_rl_sdk.check_env`` uses too; the grid games (gamekit) have one for each prompt format."""
    respond = getattr(env, "action_response", None)
    if callable(respond):
        return str(respond(action))
    return DEFAULT_ACTION_REPLY.format(action)

"""Whose turn limit an episode runs under, and which episodes a limit cut short.

An env knows how long its episodes may run (:meth:`vista_rl.Env.turn_limit`: a maze's step budget, a
QA env's ``max_turns``); the run config's ``rollout.max_turns`` is the engine's cap.  Before issue 39
the cap defaulted to 5 whatever the env said, and a 30-step maze scored its own oracle 0.55 without a
word.  So a run that does not set ``rollout.max_turns`` plays the env's limit
(:func:`with_env_turn_limit`), and an episode the engine ends by a limit the env did not choose is
marked ``cut_off`` in its trajectory (:func:`is_cut_off`) and counted in every summary.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from vista_rl.errors import VistaError

if TYPE_CHECKING:
    from vista_rl.config import RunConfig
    from vista_rl.env import Env

#: ``rollout.max_turns`` when neither the run config nor the env sets one.
DEFAULT_MAX_TURNS = 5
#: Stop reasons of limits the engine imposes, not the env: the turn cap, the context-token budget,
#: and an engine's own response-length cap (verl's agent loop).
ENGINE_LIMITS = frozenset({"max_turns", "token_budget", "response_length"})


def env_turn_limit(env: Env) -> int | None:
    """``env.turn_limit()``, checked: a whole number >= 1, or ``None`` when the env sets no limit.

    Anything else (``0``, ``"30"``, ``2.5``) is a :class:`VistaError` naming the env class: a limit
    that silently reads as "none" would bring back the silent cut this module exists to stop."""
    limit = env.turn_limit()
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise VistaError(f"{type(env).__name__}.turn_limit() returned {limit!r}; it must be a whole number "
                         ">= 1 (the most model turns an episode takes) or None (no limit)")
    return limit


def max_turns_is_set(run: RunConfig) -> bool:
    """Whether the run config sets ``rollout.max_turns`` itself (a YAML key, ``--set``, a flag)."""
    return "max_turns" in run.rollout.model_fields_set


def with_env_turn_limit(run: RunConfig, env: Env | None = None) -> RunConfig:
    """``run`` with ``rollout.max_turns`` set to the env's declared limit, when the config sets none.

    A config that sets ``rollout.max_turns`` is returned as it is (the demos' verdicts depend on
    theirs).  ``env`` is the run's env when the caller has made one already; otherwise one is made
    and closed here.  When the env cannot be made, ``run`` comes back unchanged: the caller's own
    check of the env reports that error with its context.  The returned config records the limit, so
    a saved ``config.yaml`` says how many turns were played."""
    if max_turns_is_set(run):
        return run
    limit = _declared(run, env)
    if limit is None:
        return run
    rollout = run.rollout.model_copy(update={"max_turns": limit})
    return run.model_copy(update={"rollout": rollout})


def _declared(run: RunConfig, env: Env | None) -> int | None:
    if env is not None:
        return env_turn_limit(env)
    import vista_rl

    try:
        made = vista_rl.make_env(run.env.id, **run.env.config)
    except Exception:  # noqa: BLE001 - reported by the caller's env check, with its context
        return None
    try:
        return env_turn_limit(made)
    finally:
        with contextlib.suppress(Exception):
            made.close()


def is_cut_off(stop_reason: str, max_turns: int, env_limit: int | None) -> bool:
    """Whether an episode that stopped with ``stop_reason`` was cut off by a limit the env did not
    choose: an engine limit (:data:`ENGINE_LIMITS`), except the turn cap when it is at least the
    env's own limit (then the env chose that length; it just did not end the episode itself)."""
    if stop_reason not in ENGINE_LIMITS:
        return False
    return not (stop_reason == "max_turns" and env_limit is not None and max_turns >= env_limit)

"""The oracle's plan on a stochastic transition table: finite-horizon value iteration.

Why: on slippery ice an action goes where it is aimed only a third of the time, so a shortest path
over the most likely outcomes walks into holes (0 successes in 6 on FrozenLake-v1). The best
action is the one with the highest probability of a successful end within the steps left, which
value iteration over gymnasium's ``P`` table computes exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: ``P[state][action] -> [(probability, next_state, reward, terminated), ...]`` (gymnasium toy text).
TransitionTable = Mapping[int, Mapping[int, Sequence[tuple[float, int, float, bool]]]]
SuccessRule = Callable[[float, bool], bool]

_CONVERGED = 1e-12
_MAX_SWEEPS = 10_000  # without a time limit: sweeps until the values stop changing


def is_stochastic(table: TransitionTable | None) -> bool:
    """Whether some action has more than one possible outcome."""
    for transitions in (table or {}).values():
        for outcomes in transitions.values():
            if sum(1 for outcome in outcomes if outcome[0] > 0) > 1:
                return True
    return False


class SuccessPolicy:
    """The action that maximises the probability of a successful end, for every state and number
    of steps left (``None`` steps left: no time limit)."""

    def __init__(self, table: TransitionTable, actions: Sequence[int], is_success: SuccessRule,
                 horizon: int | None) -> None:
        states = sorted({int(s) for s in table} | {int(o[1]) for t in table.values() for os in t.values() for o in os})
        size = states[-1] + 1
        self.actions = list(actions)
        # success[a, s]: chance of ending successfully on this step; moves[a, s, s']: chance of going on to s'.
        success = np.zeros((len(self.actions), size))
        moves = np.zeros((len(self.actions), size, size))
        for s, transitions in table.items():
            for a, action in enumerate(self.actions):
                for probability, nxt, reward, done in transitions.get(action, ()):
                    won = is_success(float(reward), bool(done))
                    if won:
                        success[a, int(s)] += probability
                    elif not done:
                        moves[a, int(s), int(nxt)] += probability
        values = np.zeros(size)
        self._best: list[np.ndarray] = [np.zeros(size, dtype=np.int64)]  # index = steps left
        self._values: list[np.ndarray] = [values]
        limit = horizon if horizon is not None else _MAX_SWEEPS
        for _ in range(limit):
            q = success + moves @ values
            new = q.max(axis=0)
            self._best.append(q.argmax(axis=0))
            self._values.append(new)
            if horizon is None and np.max(np.abs(new - values)) < _CONVERGED:
                break
            values = new

    def action(self, state: int, steps_left: int | None) -> int:
        """The best action index (into ``actions``) from ``state`` with ``steps_left`` steps."""
        return int(self._best[self._index(steps_left)][state])

    def success_probability(self, state: int, steps_left: int | None) -> float:
        return float(self._values[self._index(steps_left)][state])

    def _index(self, steps_left: int | None) -> int:
        last = len(self._best) - 1
        return last if steps_left is None else max(0, min(int(steps_left), last))


def time_limit_wrapper(env: Any) -> Any:
    """``env``'s gymnasium ``TimeLimit`` wrapper, or ``None``."""
    import gymnasium

    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return env
        env = env.env
    return None


def time_limit(env: Any) -> int | None:
    """The step limit of ``env``'s gymnasium ``TimeLimit`` wrapper, or ``None`` without one."""
    wrapper = time_limit_wrapper(env)
    return None if wrapper is None else int(wrapper._max_episode_steps)


def steps_left(env: Any) -> int | None:
    """Steps before the ``TimeLimit`` wrapper truncates ``env``, or ``None`` without one."""
    wrapper = time_limit_wrapper(env)
    return None if wrapper is None else max(0, int(wrapper._max_episode_steps) - int(wrapper._elapsed_steps or 0))

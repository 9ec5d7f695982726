"""Shortest plans read off a distance-to-goal table (the grid games' oracles).

Why a table: both Sokoban's generator (by reverse play) and FrozenLake's map builder (by breadth-first
search from the goal) already know every reachable state's exact distance to success, so the oracle
needs no search of its own: from each state it takes an action whose successor is one step closer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

State = TypeVar("State", bound=Hashable)


def greedy_plan(start: State, distance: Callable[[State], int | None],
                successors: Callable[[State], Iterable[tuple[int, State]]]) -> list[int] | None:
    """Actions from ``start`` down ``distance`` to a state at distance 0.

    ``distance(state)`` is the number of actions to success, or ``None``/negative where the table does
    not know the state (unreachable, a hole, off the generator's tree); ``successors(state)`` yields
    ``(action, next_state)`` for the actions that change the state, in preference order (the first
    one a step closer is taken).  Returns ``[]`` at the goal, and ``None`` when ``start`` is not in the
    table or the table is not exact (no successor is one step closer), so the caller can fall back to
    a search.
    """
    remaining = distance(start)
    if remaining is None or remaining < 0:
        return None
    plan: list[int] = []
    state = start
    while remaining > 0:
        for action, following in successors(state):
            if distance(following) == remaining - 1:
                plan.append(action)
                state, remaining = following, remaining - 1
                break
        else:
            return None
    return plan

"""A breadth-first-search oracle for MiniGrid: the fewest actions to the goal square.

Why: MiniGrid envs have no transition table, but their state is small and fully readable from
``unwrapped.grid`` and the agent's position, direction and carried object.  The search models the
rules of ``MiniGridEnv.step`` that reaching a goal needs: turning, moving onto free or overlappable
cells (never lava), picking up keys, balls and boxes, and opening doors (a locked door needs the
key of its colour).  Dropping and box contents are not modelled, so missions without a goal square
(``go to the red ball``, ``put X near Y``) get no plan and the oracle says so.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

#: MiniGrid's DIR_TO_VEC: 0 right (+x), 1 down (+y), 2 left, 3 up.
_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_PICKABLE = ("key", "ball", "box")
_MAX_STATES = 200_000


class _State(NamedTuple):
    x: int
    y: int
    direction: int
    carrying: tuple[str, str] | None
    taken: frozenset[tuple[int, int]]  # cells whose object was picked up
    opened: frozenset[tuple[int, int]]  # doors opened by the plan


def is_minigrid(unwrapped: Any) -> bool:
    return all(hasattr(unwrapped, name) for name in ("grid", "agent_pos", "agent_dir", "carrying", "actions"))


def has_goal(unwrapped: Any) -> bool:
    grid = unwrapped.grid
    return any(cell is not None and cell.type == "goal" for cell in grid.grid)


def plan(unwrapped: Any) -> list[int] | None:
    """Action ids (MiniGrid's ``Actions``) of a shortest way to a goal square, or ``None``."""
    grid, actions = unwrapped.grid, unwrapped.actions
    carried = unwrapped.carrying
    start = _State(int(unwrapped.agent_pos[0]), int(unwrapped.agent_pos[1]), int(unwrapped.agent_dir),
                   (carried.type, carried.color) if carried is not None else None, frozenset(), frozenset())

    def cell(state: _State, x: int, y: int) -> Any:
        if (x, y) in state.taken:
            return None
        if not (0 <= x < grid.width and 0 <= y < grid.height):
            return _WALL
        return grid.get(x, y)

    def is_open(state: _State, x: int, y: int, door: Any) -> bool:
        return bool(door.is_open) or (x, y) in state.opened

    parents: dict[_State, tuple[_State, int] | None] = {start: None}
    queue = deque([start])
    while queue and len(parents) < _MAX_STATES:
        state = queue.popleft()
        dx, dy = _DIRECTIONS[state.direction]
        fx, fy = state.x + dx, state.y + dy
        front = cell(state, fx, fy)
        moves: list[tuple[int, _State]] = [
            (int(actions.left), state._replace(direction=(state.direction - 1) % 4)),
            (int(actions.right), state._replace(direction=(state.direction + 1) % 4)),
        ]
        if front is None or (front.type == "door" and is_open(state, fx, fy, front)) or (
                front.type != "door" and front.type != "lava" and front.can_overlap()):
            if front is not None and front.type == "goal":
                return _unwind(parents, state, [int(actions.forward)])
            moves.append((int(actions.forward), state._replace(x=fx, y=fy)))
        elif front.type in _PICKABLE and state.carrying is None:
            moves.append((int(actions.pickup), state._replace(carrying=(front.type, front.color),
                                                                taken=state.taken | {(fx, fy)})))
        elif front.type == "door" and not is_open(state, fx, fy, front) and (
                not front.is_locked or state.carrying == ("key", front.color)):
            moves.append((int(actions.toggle), state._replace(opened=state.opened | {(fx, fy)})))
        for action, nxt in moves:
            if nxt not in parents:
                parents[nxt] = (state, action)
                queue.append(nxt)
    return None


def _unwind(parents: dict[_State, tuple[_State, int] | None], state: _State, tail: list[int]) -> list[int]:
    plan_: list[int] = []
    link = parents[state]
    while link is not None:
        state, action = link
        plan_.append(action)
        link = parents[state]
    return plan_[::-1] + tail


class _Wall:
    """Outside the grid: blocks like a wall."""

    type = "wall"
    color = "grey"
    is_locked = True
    is_open = False

    def can_overlap(self) -> bool:
        return False


_WALL = _Wall()

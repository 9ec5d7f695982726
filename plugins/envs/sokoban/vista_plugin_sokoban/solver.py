"""Shortest Sokoban solutions (counted in moves, pushes and walks alike).

Two exact tools:

- :func:`solve`: A* from one state with a consistent heuristic (sum over boxes of the Manhattan
  distance to the nearest target: a walk leaves it unchanged, a push changes it by at most one) and
  dead-square pruning (a box on a cell from which no target can be reached is never solvable), so
  the first goal popped is optimal.
- :func:`reverse_distances`: breadth-first search *backwards* from every solved state (boxes on the
  targets, player on any free cell) by pulls and walks.  Each state found gets its exact shortest
  solution length; the generator uses it to pick levels of a wanted difficulty, and the env uses it
  as a lookup table for the oracle.
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import count

from vista_plugin_sokoban.level import Level, Moved, State, move


def live_cells(level: Level) -> frozenset[int]:
    """Cells from which a box can still be pushed onto some target (pull boxes back from targets:
    a pull from ``c`` to ``c - d`` needs ``c - d`` and ``c - 2d`` free)."""
    live = set(level.targets)
    queue = deque(level.targets)
    while queue:
        cell = queue.popleft()
        for delta in level.deltas:
            back, stand = cell - delta, cell - 2 * delta
            if 0 <= stand < len(level.free) and level.free[back] and level.free[stand] and back not in live:
                live.add(back)
                queue.append(back)
    return frozenset(live)


def _heuristic(boxes: tuple[int, ...], targets: tuple[tuple[int, int], ...], width: int) -> int:
    total = 0
    for box in boxes:
        row, col = divmod(box, width)
        total += min(abs(row - tr) + abs(col - tc) for tr, tc in targets)
    return total


def solve(level: Level, state: State | None = None, max_nodes: int = 500_000,
          pushes: tuple[int, ...] = (0, 1, 2, 3)) -> list[int] | None:
    """A shortest action list (indices into ``ACTION_NAMES``) from ``state`` (default: the start),
    ``[]`` if already solved, ``None`` if unsolvable or ``max_nodes`` states were expanded.  Only the
    actions in ``pushes`` may push a box (a flawed teacher's blind spot; the heuristic stays admissible)."""
    start = state or level.start
    target_set = frozenset(level.targets)
    if set(start[1]) == target_set:
        return []
    live = live_cells(level)
    if any(box not in live for box in start[1]):
        return None
    target_cells = tuple(divmod(t, level.width) for t in level.targets)
    tie = count()
    frontier: list[tuple[int, int, int, State]] = [(_heuristic(start[1], target_cells, level.width), next(tie), 0, start)]
    parents: dict[State, tuple[State, int] | None] = {start: None}
    best_cost = {start: 0}
    expanded = 0
    while frontier:
        _, _, cost, current = heapq.heappop(frontier)
        if cost > best_cost.get(current, cost):
            continue
        if set(current[1]) == target_set:
            return _path(parents, current)
        expanded += 1
        if expanded > max_nodes:
            return None
        for action in range(4):
            nxt, kind = move(level, current, action)
            if kind is Moved.BLOCKED:
                continue
            if kind is Moved.PUSHED and (action not in pushes or any(box not in live for box in nxt[1])):
                continue
            new_cost = cost + 1
            if new_cost < best_cost.get(nxt, new_cost + 1):
                best_cost[nxt] = new_cost
                parents[nxt] = (current, action)
                estimate = new_cost + _heuristic(nxt[1], target_cells, level.width)
                heapq.heappush(frontier, (estimate, next(tie), new_cost, nxt))
    return None


def _path(parents: dict[State, tuple[State, int] | None], end: State) -> list[int]:
    actions = []
    link = parents[end]
    while link is not None:
        previous, action = link
        actions.append(action)
        link = parents[previous]
    actions.reverse()
    return actions


def reverse_distances(level: Level, max_depth: int, max_states: int = 300_000) -> dict[State, int]:
    """Exact shortest solution length of every state within ``max_depth`` moves of solved."""
    deltas = level.deltas
    free = level.free
    goal_boxes = tuple(sorted(level.targets))
    box_set = set(goal_boxes)
    distances: dict[State, int] = {}
    frontier: list[State] = []
    for cell, is_free in enumerate(free):
        if is_free and cell not in box_set:
            state = (cell, goal_boxes)
            distances[state] = 0
            frontier.append(state)
    depth = 0
    while frontier and depth < max_depth and len(distances) < max_states:
        depth += 1
        next_frontier: list[State] = []
        for player, boxes in frontier:
            for delta in deltas:
                step = player + delta
                if not free[step] or step in boxes:
                    continue
                walked = (step, boxes)  # forward: walk from `step` back to `player`
                if walked not in distances:
                    distances[walked] = depth
                    next_frontier.append(walked)
                pulled_from = player - delta
                if pulled_from in boxes:  # forward: push the box from `player` to `pulled_from`
                    moved = tuple(sorted(player if box == pulled_from else box for box in boxes))
                    pulled = (step, moved)
                    if pulled not in distances:
                        distances[pulled] = depth
                        next_frontier.append(pulled)
        frontier = next_frontier
    return distances

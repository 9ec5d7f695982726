"""FrozenLake maps: seeded generation with a guaranteed path, and shortest distances to the goal.

A map is a tuple of strings in gymnasium's letters (``F`` frozen, ``H`` hole, ``S`` start, ``G``
goal).  Unlike gymnasium's ``generate_random_map`` the start and goal are random cells (as the brief
for VISTA's FrozenLake asks), and the map is rejected until the goal is reachable from the start.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

ACTION_NAMES: tuple[str, ...] = ("Left", "Down", "Right", "Up")  # gymnasium's order
MOVES: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))


class GenerationError(RuntimeError):
    """No map met the constraints within the allowed attempts."""


@dataclass(frozen=True)
class LakeMap:
    size: int
    holes: frozenset[int]
    start: int
    goal: int
    distance: tuple[int, ...]  # moves to the goal from each cell (-1: unreachable or a hole)

    def cell(self, index: int) -> tuple[int, int]:
        return divmod(index, self.size)

    def rows(self) -> list[str]:
        """gymnasium's ``desc`` letters."""
        out = []
        for row in range(self.size):
            letters = []
            for col in range(self.size):
                index = row * self.size + col
                letters.append("S" if index == self.start else "G" if index == self.goal
                               else "H" if index in self.holes else "F")
            out.append("".join(letters))
        return out


def neighbour(size: int, cell: int, action: int) -> int:
    """The cell an action leads to (the same cell at the edge)."""
    row, col = divmod(cell, size)
    dr, dc = MOVES[action]
    row, col = row + dr, col + dc
    if 0 <= row < size and 0 <= col < size:
        return row * size + col
    return cell


def distances_to_goal(size: int, holes: frozenset[int], goal: int) -> tuple[int, ...]:
    distance = [-1] * (size * size)
    distance[goal] = 0
    queue = deque([goal])
    while queue:
        cell = queue.popleft()
        for action in range(4):
            other = neighbour(size, cell, action)
            if other != cell and distance[other] < 0 and other not in holes:
                distance[other] = distance[cell] + 1
                queue.append(other)
    return tuple(distance)


def from_rows(rows: list[str] | tuple[str, ...]) -> LakeMap:
    """A fixed map from gymnasium's letters (square, one ``S``, one ``G``)."""
    size = len(rows)
    if size < 2 or any(len(row) != size for row in rows):
        raise ValueError("a FrozenLake map must be square with at least 2 rows")
    letters = "".join(rows)
    if letters.count("S") != 1 or letters.count("G") != 1 or set(letters) - set("SFHG"):
        raise ValueError("a FrozenLake map needs one S, one G, and only the letters S, F, H, G")
    holes = frozenset(i for i, ch in enumerate(letters) if ch == "H")
    goal = letters.index("G")
    return LakeMap(size, holes, letters.index("S"), goal, distances_to_goal(size, holes, goal))


def generate_map(rng: random.Random, size: int, p: float, min_solution_steps: int = 1,
                 max_solution_steps: int | None = None, random_start_goal: bool = True,
                 max_tries: int = 10_000) -> LakeMap:
    """A map whose cells are frozen with probability ``p``, with a start-to-goal path whose length
    lies in the wanted range."""
    cells = size * size
    upper = max_solution_steps if max_solution_steps is not None else cells
    for _ in range(max_tries):
        holes = {cell for cell in range(cells) if rng.random() >= p}
        start, goal = rng.sample(range(cells), 2) if random_start_goal else (0, cells - 1)
        holes.discard(start)
        holes.discard(goal)
        frozen_holes = frozenset(holes)
        distance = distances_to_goal(size, frozen_holes, goal)
        if min_solution_steps <= distance[start] <= upper:
            return LakeMap(size, frozen_holes, start, goal, distance)
    raise GenerationError(f"no {size}x{size} map with p={p} and a path of {min_solution_steps}..{upper} "
                          f"moves in {max_tries} attempts; raise p or widen the solution range")

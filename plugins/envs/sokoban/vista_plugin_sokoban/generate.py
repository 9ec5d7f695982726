"""gym-sokoban-style level generation, deterministic from one ``random.Random``.

Three stages, as in gym-sokoban (our own code): (1) room topology by a random walk that stamps small
floor masks, changing direction with probability 0.35; (2) targets, and boxes placed *on* them;
(3) reverse playing: walk and pull boxes backwards from the solved room (up to ``search_depth``
moves, at most 300,000 states).  Every state reached that way is solvable, and a breadth-first
reverse search also gives each state's exact shortest solution length, so levels are filtered by
``min_solution_steps``/``max_solution_steps`` without a separate solver pass.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from vista_plugin_sokoban.level import Level, State
from vista_plugin_sokoban.solver import reverse_distances

_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
# Floor stamps relative to the walker (gym-sokoban's five 3x3 masks).
_MASKS = (
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, -1), (1, 0)),
    ((0, 0), (0, 1), (1, 0)),
)


class GenerationError(RuntimeError):
    """No level met the constraints within the allowed attempts."""


@dataclass(frozen=True)
class GeneratedLevel:
    level: Level
    solution_length: int
    distances: dict[State, int]  # exact solution lengths of nearby states (the oracle's table)


def room_topology(rng: random.Random, height: int, width: int, num_steps: int,
                  p_change_direction: float = 0.35) -> list[bool]:
    """Floor (True) / wall cells; the border is always wall."""
    floor = [False] * (height * width)
    row, col = rng.randint(1, height - 2), rng.randint(1, width - 2)
    direction = rng.choice(_DIRECTIONS)
    for _ in range(num_steps):
        if rng.random() < p_change_direction:
            direction = rng.choice(_DIRECTIONS)
        row = min(max(row + direction[0], 1), height - 2)
        col = min(max(col + direction[1], 1), width - 2)
        for dr, dc in rng.choice(_MASKS):
            r, c = row + dr, col + dc
            if 0 < r < height - 1 and 0 < c < width - 1:
                floor[r * width + c] = True
    return floor


def generate_level(
    rng: random.Random,
    dim_room: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    num_gen_steps: int | None = None,
    search_depth: int = 100,
    min_solution_steps: int = 1,
    max_solution_steps: int | None = None,
    selection: Literal["random", "hardest"] = "random",
    max_tries: int = 200,
) -> GeneratedLevel:
    """A solvable level whose shortest solution length lies in the wanted range."""
    height, width = dim_room
    steps = num_gen_steps if num_gen_steps is not None else int(1.7 * (height + width))
    upper = search_depth if max_solution_steps is None else min(max_solution_steps, search_depth)
    for _ in range(max_tries):
        floor = room_topology(rng, height, width, steps)
        cells = [index for index, is_floor in enumerate(floor) if is_floor]
        if len(cells) < num_boxes + 1:
            continue
        targets = tuple(sorted(rng.sample(cells, num_boxes)))
        draft = Level(height, width, tuple(floor), targets, targets, cells[0])
        distances = reverse_distances(draft, max_depth=upper)
        candidates = [state for state, dist in distances.items() if min_solution_steps <= dist <= upper]
        if not candidates:
            continue
        if selection == "hardest":
            longest = max(distances[state] for state in candidates)
            candidates = [state for state in candidates if distances[state] == longest]
        player, boxes = rng.choice(candidates)
        level = Level(height, width, tuple(floor), targets, boxes, player)
        return GeneratedLevel(level, distances[(player, boxes)], distances)
    raise GenerationError(
        f"no {height}x{width} level with {num_boxes} box(es) and a shortest solution of "
        f"{min_solution_steps}..{upper} moves in {max_tries} attempts; widen min_solution_steps/"
        "max_solution_steps, raise search_depth or use a bigger room")

"""Seeded grid worlds: a walled room with a few wall blocks and coloured objects, the agent's pose,
and the geometry both the renderer and the ground truth read.

Units: one grid cell is ``step_length`` metres (VAGEN moves 0.5 m per step), so a move is one cell
and distances convert to metres by multiplying by the step length.  The agent stands on cell
centres, faces one of four headings and tilts its camera in 30-degree steps, as AI2-THOR's
``MoveAhead``/``RotateRight``/``LookDown`` do in VAGEN's navigation env.  Everything comes from
``random.Random(seed)`` with no numpy randomness, so a world is the same in every process.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (214, 48, 49), "green": (39, 174, 96), "blue": (41, 98, 255), "yellow": (241, 196, 15),
    "purple": (142, 68, 173), "orange": (243, 121, 32),
}
SHAPES: tuple[str, ...] = ("ball", "box", "cone", "pillar")
# (width, height) in cells; a cell is 0.5 m by default.
SHAPE_SIZE: dict[str, tuple[float, float]] = {
    "ball": (0.7, 0.7), "box": (0.75, 0.75), "cone": (0.7, 1.0), "pillar": (0.4, 1.8),
}
HEADINGS: tuple[str, ...] = ("north", "east", "south", "west")
# Unit vectors (x = column, y = row) for each heading; north is toward row 0.
FORWARD: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))

WALL, FLOOR = 1, 0
Cell = tuple[int, int]  # (row, col)


class GenerationError(RuntimeError):
    """No world with the requested properties was found for a seed (loosen the constraints)."""


@dataclass(frozen=True)
class WorldObject:
    colour: str
    shape: str
    cell: Cell

    @property
    def name(self) -> str:
        return f"{self.colour} {self.shape}"

    @property
    def centre(self) -> tuple[float, float]:
        """(x, y) in cells."""
        return self.cell[1] + 0.5, self.cell[0] + 0.5


@dataclass(frozen=True)
class Pose:
    row: int
    col: int
    heading: int  # index into HEADINGS
    horizon: int  # camera tilt in degrees, positive looks down (AI2-THOR's convention)

    @property
    def position(self) -> tuple[float, float]:
        return self.col + 0.5, self.row + 0.5


@dataclass(frozen=True)
class World:
    grid: tuple[tuple[int, ...], ...]  # WALL / FLOOR by [row][col]; the border is wall
    objects: tuple[WorldObject, ...]
    target: int  # index into objects
    start: Pose
    goal_cells: frozenset[Cell]  # free cells within the success threshold of the target

    @property
    def size(self) -> int:
        return len(self.grid)

    @property
    def target_object(self) -> WorldObject:
        return self.objects[self.target]

    def free(self, cell: Cell) -> bool:
        row, col = cell
        if not (0 <= row < self.size and 0 <= col < self.size) or self.grid[row][col] == WALL:
            return False
        return all(obj.cell != cell for obj in self.objects)


def distance_cells(a: tuple[float, float], b: tuple[float, float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def relative_angle(pose: Pose, point: tuple[float, float]) -> float:
    """Degrees from the agent's facing direction to ``point``, in (-180, 180]; positive is right."""
    px, py = pose.position
    fx, fy = FORWARD[pose.heading]
    dx, dy = point[0] - px, point[1] - py
    ahead = dx * fx + dy * fy
    right = dx * -fy + dy * fx
    return math.degrees(math.atan2(right, ahead))


def direction_word(angle: float) -> str:
    """VAGEN's four bins: ahead within 45 degrees, right/left up to 135, else back."""
    if -45 <= angle <= 45:
        return "ahead"
    if 45 < angle <= 135:
        return "right"
    if -135 <= angle < -45:
        return "left"
    return "back"


def _bfs(grid: list[list[int]], blocked: set[Cell], sources: set[Cell]) -> dict[Cell, int]:
    """Cell distances (4-connected moves through free cells) from any source."""
    dist = {cell: 0 for cell in sources}
    queue = deque(sorted(sources))
    size = len(grid)
    while queue:
        row, col = queue.popleft()
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            nxt = (row + dr, col + dc)
            if (0 <= nxt[0] < size and 0 <= nxt[1] < size and nxt not in dist
                    and grid[nxt[0]][nxt[1]] == FLOOR and nxt not in blocked):
                dist[nxt] = dist[(row, col)] + 1
                queue.append(nxt)
    return dist


def generate_world(rng: random.Random, size: int, num_objects: int, wall_density: float, threshold_cells: float,
                   min_solution_cells: int, max_solution_cells: int, tries: int = 200) -> World:
    """A room ``size`` cells across (border walls included) with ``num_objects`` distinct coloured
    objects, one of them the target, and a start pose whose shortest walk into the goal region
    (free cells within ``threshold_cells`` of the target's centre) is within the wanted range."""
    interior = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    kinds = [(colour, shape) for colour in COLOURS for shape in SHAPES]
    for _ in range(tries):
        grid = [[WALL if r in (0, size - 1) or c in (0, size - 1) else FLOOR for c in range(size)]
                for r in range(size)]
        for cell in rng.sample(interior, int(round(wall_density * len(interior)))):
            grid[cell[0]][cell[1]] = WALL
        free = [cell for cell in interior if grid[cell[0]][cell[1]] == FLOOR]
        if len(free) < num_objects + 2:
            continue
        cells = rng.sample(free, num_objects)
        objects = tuple(WorldObject(colour, shape, cell)
                        for (colour, shape), cell in zip(rng.sample(kinds, num_objects), cells, strict=True))
        target = rng.randrange(num_objects)
        blocked = set(cells)
        tx, ty = objects[target].centre
        goal = {cell for cell in free if cell not in blocked
                and distance_cells((cell[1] + 0.5, cell[0] + 0.5), (tx, ty)) <= threshold_cells + 1e-9}
        if not goal:
            continue
        dist = _bfs(grid, blocked, goal)
        starts = sorted(cell for cell, d in dist.items() if min_solution_cells <= d <= max_solution_cells)
        if not starts:
            continue
        row, col = rng.choice(starts)
        start = Pose(row, col, rng.randrange(4), 0)
        return World(tuple(tuple(r) for r in grid), objects, target, start, frozenset(goal))
    raise GenerationError(f"no {size}x{size} world with {num_objects} objects and a start "
                          f"{min_solution_cells}-{max_solution_cells} cells from the goal region after {tries} "
                          "tries; lower wall_density or num_objects, or widen the solution range")


# ---------------------------------------------------------------------- motion
ACTION_NAMES: tuple[str, ...] = ("moveahead", "moveback", "moveright", "moveleft", "rotateright", "rotateleft",
                                 "lookup", "lookdown")
ACTION_HELP: tuple[str, ...] = (
    "move forward by one step", "move backward by one step", "move rightward by one step",
    "move leftward by one step", "rotate to the right by 90 degrees", "rotate to the left by 90 degrees",
    "tilt the camera upward by 30 degrees", "tilt the camera downward by 30 degrees",
)
HORIZON_STEP = 30
HORIZON_RANGE = (-30, 60)  # AI2-THOR's default agent: 30 up to 60 down


def next_pose(world: World, pose: Pose, action: int) -> Pose | None:
    """The pose after ``action`` (an index into ACTION_NAMES), or None when it is blocked (a wall
    or an object in the way, or the camera at its tilt limit) and nothing changes."""
    if action < 4:
        fx, fy = FORWARD[pose.heading]
        dx, dy = ((fx, fy), (-fx, -fy), (-fy, fx), (fy, -fx))[action]
        cell = (pose.row + dy, pose.col + dx)
        return Pose(cell[0], cell[1], pose.heading, pose.horizon) if world.free(cell) else None
    if action < 6:
        turn = 1 if action == 4 else -1
        return Pose(pose.row, pose.col, (pose.heading + turn) % 4, pose.horizon)
    horizon = pose.horizon + (-HORIZON_STEP if action == 6 else HORIZON_STEP)
    if not HORIZON_RANGE[0] <= horizon <= HORIZON_RANGE[1]:
        return None
    return Pose(pose.row, pose.col, pose.heading, horizon)

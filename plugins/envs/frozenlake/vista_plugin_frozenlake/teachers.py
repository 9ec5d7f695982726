"""Scripted FrozenLake teachers with a systematic, stated error (issue 38), beside the perfect oracle.

Why: with a perfect teacher SFT alone can reach the ceiling, so "RL beats SFT" only says SFT was
stopped early.  A teacher whose mistakes are structural (not noise that cloning averages away) leaves
a gap that imitation cannot close and RL can.  The env picks one with ``teacher: NAME`` in its config
(default ``oracle``: the shortest-path planner, for tests and ``check_env``); only
``oracle_response`` changes, never the rules, rewards or observations.

- ``goalward``: a planner that **never steps away from the goal**.  Each move must shorten the
  Manhattan distance to the goal; among such moves it takes one on a shortest path if there is one,
  else the one nearest the goal by path (a safe cell), else the first (into a hole).  It solves every
  map with a monotone path and fails wherever every path makes a detour.  On the main job's maps
  (4x4, p 0.8, random start and goal) detours are rare: it solves about 0.96 of them.
- ``hole_blind``: a planner that **never looks at the holes**: it walks the L-shaped path to the goal,
  along the row first (Left/Right), then along the column (Down/Up), and steps into any hole on it.
  It fails wherever that path crosses a hole (about 0.2-0.3 of the main job's maps).
- ``coin_walk``: a walker that **never looks at the holes and decides each step by a coin**: where
  both a row move and a column move bring it closer to the goal, a fair coin picks one, so it walks
  one of the shortest L-to-staircase paths at random and steps into any hole on it.  Unlike
  ``hole_blind`` its choices differ from map to map, so a policy cloned from it still samples both
  moves, and RL can learn which one the holes allow; a deterministic teacher's clone never samples
  the move its teacher never made (docs/main-job.md, "why RL could not leave the plateau").  The coin
  is a hash of the map and the cell, so the teacher is reproducible and the same on every engine.
"""

from __future__ import annotations

import zlib

from vista_plugin_frozenlake.lake import LakeMap, neighbour

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "the shortest-path planner (exact)",
    "goalward": "never steps away from the goal: fails wherever the only paths make a detour",
    "hole_blind": "walks the L-shaped path (row first, then column) and never looks at the holes",
    "coin_walk": "a coin picks the row or the column move toward the goal each step; never looks at the holes",
}


def manhattan(lake: LakeMap, a: int, b: int) -> int:
    (ra, ca), (rb, cb) = lake.cell(a), lake.cell(b)
    return abs(ra - rb) + abs(ca - cb)


def goalward_move(lake: LakeMap, player: int) -> int | None:
    """The ``goalward`` teacher's move from ``player`` (``None`` at the goal)."""
    if player == lake.goal:
        return None
    here = manhattan(lake, player, lake.goal)
    closer = [action for action in range(4) if manhattan(lake, neighbour(lake.size, player, action), lake.goal) < here]
    shortest = [a for a in closer if lake.distance[neighbour(lake.size, player, a)] == lake.distance[player] - 1
                and lake.distance[player] > 0]
    if shortest:
        return shortest[0]
    safe = [a for a in closer if lake.distance[neighbour(lake.size, player, a)] >= 0]
    if safe:
        return min(safe, key=lambda a: lake.distance[neighbour(lake.size, player, a)])
    dry = [a for a in closer if neighbour(lake.size, player, a) not in lake.holes]
    return (dry or closer)[0]


def goalward_plan(lake: LakeMap, player: int) -> list[int]:
    """The ``goalward`` teacher's whole walk from ``player``: until the goal, a hole, or a cell seen
    before (it can only walk toward the goal, so it never revisits; the cap is a guard)."""
    plan: list[int] = []
    seen = {player}
    while player != lake.goal and player not in lake.holes and len(plan) < lake.size * lake.size:
        action = goalward_move(lake, player)
        if action is None:
            break
        plan.append(action)
        player = neighbour(lake.size, player, action)
        if player in seen:
            break
        seen.add(player)
    return plan


def hole_blind_plan(lake: LakeMap, player: int) -> list[int]:
    """The ``hole_blind`` teacher's walk from ``player``: Right or Left until the goal's column, then
    Down or Up until its row, holes or not (action indices in gymnasium's order: Left, Down, Right, Up)."""
    (row, col), (goal_row, goal_col) = lake.cell(player), lake.cell(lake.goal)
    plan = [2 if goal_col > col else 0] * abs(goal_col - col)
    return plan + [1 if goal_row > row else 3] * abs(goal_row - row)


def coin_walk_plan(lake: LakeMap, player: int) -> list[int]:
    """The ``coin_walk`` teacher's walk from ``player`` to the goal's cell, holes or not: at each cell
    the moves that shorten the Manhattan distance (one or two), the choice between two by a coin that
    is the CRC-32 of the map's letters and the cell (stable across processes, unlike ``hash``)."""
    letters = "".join(lake.rows())
    plan: list[int] = []
    (row, col), (goal_row, goal_col) = lake.cell(player), lake.cell(lake.goal)
    while (row, col) != (goal_row, goal_col):
        closer = ([2 if goal_col > col else 0] if goal_col != col else []) + \
                 ([1 if goal_row > row else 3] if goal_row != row else [])
        coin = zlib.crc32(f"{letters}|{row * lake.size + col}".encode()) & 1
        action = closer[coin % len(closer)]
        plan.append(action)
        row, col = lake.cell(neighbour(lake.size, row * lake.size + col, action))
    return plan


def teacher_plan(teacher: str, lake: LakeMap, player: int) -> list[int]:
    """The named flawed teacher's plan (``oracle`` is the env's own planner, not here)."""
    if teacher == "goalward":
        return goalward_plan(lake, player)
    if teacher == "hole_blind":
        return hole_blind_plan(lake, player)
    if teacher == "coin_walk":
        return coin_walk_plan(lake, player)
    raise ValueError(f"unknown FrozenLake teacher {teacher!r}; choose from {sorted(TEACHERS)}")

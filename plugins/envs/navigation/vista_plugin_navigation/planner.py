"""The oracle's planner: the cheapest action sequence from a pose into the goal region.

Costs are chosen so the plans look like a sensible first-person walker, which is what SFT data
should teach: a step forward or a quarter turn costs 1, a sideways or backward step 2 (so the
oracle turns to face where it goes unless a strafe saves a turn and a step).  Level the camera
first if it is tilted (the plan never needs to look up or down).  Dijkstra over (row, col,
heading) with ties broken by action order, so a plan is a pure function of the world and the pose.
"""

from __future__ import annotations

import heapq

from vista_plugin_navigation.world import ACTION_NAMES, Pose, World, next_pose

COSTS: tuple[int, ...] = (1, 2, 2, 2, 1, 1)  # moveahead, moveback, moveright, moveleft, rotateright, rotateleft
LOOKUP, LOOKDOWN = ACTION_NAMES.index("lookup"), ACTION_NAMES.index("lookdown")


def plan(world: World, pose: Pose) -> list[int] | None:
    """Action indices that bring ``pose`` into ``world.goal_cells``; [] when already there; None
    when the goal region cannot be reached."""
    level = [LOOKDOWN] * (-pose.horizon // 30) if pose.horizon < 0 else [LOOKUP] * (pose.horizon // 30)
    start = Pose(pose.row, pose.col, pose.heading, 0)
    if (start.row, start.col) in world.goal_cells:
        return level
    best: dict[Pose, int] = {start: 0}
    parent: dict[Pose, tuple[Pose, int]] = {}
    queue: list[tuple[int, int, Pose]] = [(0, 0, start)]
    order = 0
    while queue:
        cost, _, current = heapq.heappop(queue)
        if cost > best[current]:
            continue
        if (current.row, current.col) in world.goal_cells:
            actions: list[int] = []
            while current != start:
                current, action = parent[current]
                actions.append(action)
            return level + actions[::-1]
        for action, step_cost in enumerate(COSTS):
            following = next_pose(world, current, action)
            if following is None:
                continue
            total = cost + step_cost
            if total < best.get(following, 1 << 30):
                best[following] = total
                parent[following] = (current, action)
                order += 1
                heapq.heappush(queue, (total, order, following))
    return None

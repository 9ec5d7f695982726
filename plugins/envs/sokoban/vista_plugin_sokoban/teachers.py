"""Scripted Sokoban teachers with a systematic, stated error (issue 38), beside the exact oracle.

Why: with a perfect teacher SFT alone can reach the ceiling, so "RL beats SFT" says only that SFT
stopped early.  A teacher whose mistakes are structural leaves a gap imitation cannot close.  The env
picks one with ``teacher: NAME`` in its config (default ``oracle``, the shortest plan, for tests and
``check_env``); only the oracle's reply changes, never the rules, rewards or observations.

- ``no_up_push``: a planner that **never pushes a box up**.  It walks the shortest solution whose
  pushes go down, left or right only.  Where every solution pushes a box up it has no move, and its
  episode ends unsolved there (SFT, which keeps the teacher's solved episodes, never shows an upward
  push).
"""

from __future__ import annotations

from vista_plugin_sokoban.level import Level, State
from vista_plugin_sokoban.solver import solve

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "the shortest plan (exact)",
    "no_up_push": "never pushes a box up: fails wherever every solution does",
}
UP, DOWN, LEFT, RIGHT = range(4)


def teacher_plan(teacher: str, level: Level, state: State) -> list[int] | None:
    """The named flawed teacher's plan from ``state`` (``oracle`` is the env's own planner, not here);
    ``None`` where it has no move."""
    if teacher == "no_up_push":
        return solve(level, state, pushes=(DOWN, LEFT, RIGHT))
    raise ValueError(f"unknown Sokoban teacher {teacher!r}; choose from {sorted(TEACHERS)}")

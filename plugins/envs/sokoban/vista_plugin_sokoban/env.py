"""SokobanEnv: VAGEN's Sokoban (same rules, rewards, symbols and prompt formats), our own code.

Levels come from :mod:`vista_plugin_sokoban.generate` seeded by ``random.Random(seed)``; frames are
numpy tiles redrawn only where an action changed something; the oracle reads the generator's exact
distance table (or runs A* once the player has left it).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator
from vista_plugin_gamekit.planning import greedy_plan
from vista_plugin_gamekit.relations import describe, relations
from vista_plugin_gamekit.sprites import TileFrame
from vista_plugin_gamekit.textgame import ActionResult, GameConfig, TextGameEnv

from vista_plugin_sokoban import render
from vista_plugin_sokoban.generate import generate_level
from vista_plugin_sokoban.level import ACTION_NAMES, Level, Moved, State, move, parse_level
from vista_plugin_sokoban.solver import solve
from vista_plugin_sokoban.teachers import teacher_plan

RULES = (
    "You are a Sokoban solver.\n"
    "Goal: push every box onto a target.\n"
    "Symbols (in text observations): # wall | _ floor | O target | X box | P you | √ box on target | "
    "S you on target. In images: brick walls, dark floor, red diamond targets, orange boxes (green "
    "when on a target), and you in blue.\n"
    "Rules: you move one cell per action; walking into a box pushes it one cell if the cell behind it "
    "is free; you cannot pull boxes or walk through walls or boxes. Up is toward the top row."
)


class SokobanConfig(GameConfig):
    dim_room: tuple[int, int] = Field((6, 6), description="room height and width, border included")
    num_boxes: int = Field(1, ge=1, le=10)
    search_depth: int = Field(100, ge=1, le=1000, description="reverse-playing depth of the generator")
    num_gen_steps: int | None = Field(None, ge=1, description="random-walk steps (default 1.7*(h+w))")
    min_solution_steps: int = Field(1, ge=1)
    max_solution_steps: int | None = Field(None, ge=1)
    selection: Literal["random", "hardest"] = "random"
    level: str | None = Field(None, description="a fixed level in VAGEN symbols instead of generated ones")
    tile_size: int = Field(16, ge=4, le=128, description="pixels per cell (16 gives 96x96 for 6x6)")
    step_penalty: float = -0.1
    box_on_target_reward: float = 1.0
    box_off_target_penalty: float = -1.0
    success_reward: float = 10.0
    teacher: Literal["oracle", "no_up_push"] = Field(
        "oracle", description="whose moves oracle_response gives (SFT data): oracle (shortest plan, exact) "
        "or no_up_push (never pushes a box up); vista_plugin_sokoban.teachers")

    @model_validator(mode="after")
    def _check_room(self) -> SokobanConfig:
        height, width = self.dim_room
        if not (4 <= height <= 40 and 4 <= width <= 40):
            raise ValueError("dim_room must be between (4, 4) and (40, 40)")
        if self.num_boxes + 1 > (height - 2) * (width - 2):
            raise ValueError(f"num_boxes={self.num_boxes} does not fit in dim_room={self.dim_room}")
        if self.max_solution_steps is not None and self.max_solution_steps < self.min_solution_steps:
            raise ValueError("max_solution_steps must be >= min_solution_steps")
        if self.level is not None:
            parse_level(self.level)  # a bad level is a config error, reported now
        return self


class SokobanEnv(TextGameEnv):
    """Push every box onto a target; several actions per turn."""

    action_names = ACTION_NAMES
    goal = "push every box onto a target"

    def __init__(self, **config: Any) -> None:
        super().__init__(SokobanConfig(**config))
        self.config: SokobanConfig
        self._fixed_level = parse_level(self.config.level) if self.config.level is not None else None
        self._level: Level | None = None
        self._current: State = (0, ())
        self._targets: frozenset[int] = frozenset()
        self._distances: dict[State, int] = {}
        self._frame = TileFrame()

    # ------------------------------------------------------------------ episode
    @property
    def level(self) -> Level:
        if self._level is None:
            raise RuntimeError("call reset() first")
        return self._level

    @property
    def solution_length(self) -> int | None:
        """Shortest solution length of the current state (from the table, else by A*)."""
        plan = self._plan()
        return None if plan is None else len(plan)

    def _new_episode(self, seed: int) -> None:
        config = self.config
        if self._fixed_level is not None:
            self._level, self._distances = self._fixed_level, {}
        else:
            generated = generate_level(
                random.Random(seed), config.dim_room, config.num_boxes, config.num_gen_steps,
                config.search_depth, config.min_solution_steps, config.max_solution_steps, config.selection)
            self._level, self._distances = generated.level, generated.distances
        self._current = self._level.start
        self._targets = frozenset(self._level.targets)
        self._frame.reset()

    def _apply(self, action: int) -> ActionResult:
        level = self.level
        before = self._current
        after, kind = move(level, before, action)
        reward = self.config.step_penalty
        if kind.changed:
            self._frame.mark(before[0], after[0])
        if kind is Moved.PUSHED:
            pushed_to = after[0] + level.deltas[action]
            self._frame.mark(pushed_to)
            was_on, now_on = after[0] in self._targets, pushed_to in self._targets
            if now_on and not was_on:
                reward += self.config.box_on_target_reward
            elif was_on and not now_on:
                reward += self.config.box_off_target_penalty
        self._current = after
        solved = all(box in self._targets for box in after[1])
        if solved:
            reward += self.config.success_reward
        return ActionResult(reward, kind.changed, solved, solved)

    def _snapshot(self) -> State:
        return self._current

    def _restore(self, snapshot: State) -> None:
        if snapshot != self._current:
            self._frame.mark(snapshot[0], self._current[0], *snapshot[1], *self._current[1])
        self._current = snapshot

    # ------------------------------------------------------------------ views
    def _kind(self, cell: int) -> int:
        on_target = cell in self._targets
        if not self.level.free[cell]:
            return render.WALL
        if cell == self._current[0]:
            return render.PLAYER_ON_TARGET if on_target else render.PLAYER
        if cell in self._current[1]:
            return render.BOX_ON_TARGET if on_target else render.BOX
        return render.TARGET if on_target else render.FLOOR

    def _image(self) -> np.ndarray:
        level = self.level
        return self._frame.render(render.tiles(self.config.tile_size), level.height, level.width, self._kind)

    def _text_grid(self) -> str:
        return self.level.to_text(self._current, sep="\t")

    def _state_dict(self, state: State) -> dict[str, Any]:
        level = self.level
        return {
            "player": list(level.cell(state[0])),
            "boxes": [list(level.cell(box)) for box in state[1]],
            "targets": [list(level.cell(target)) for target in level.targets],
            "boxes_on_target": sum(box in self._targets for box in state[1]),
            "grid": level.to_text(state),
        }

    def _state(self) -> dict[str, Any]:
        return self._state_dict(self._current)

    def _objects(self) -> list[tuple[str, tuple[int, int]]]:
        level = self.level
        boxes = [("box", level.cell(box)) for box in self._current[1]]
        return boxes + [("target", level.cell(target)) for target in level.targets]

    def _relations(self) -> list[dict[str, str]]:
        return relations(self.level.cell(self._current[0]), self._objects())

    def _describe(self) -> str:
        player = self.level.cell(self._current[0])
        on_target = sum(box in self._targets for box in self._current[1])
        lead = f"The player is at row {player[0]}, column {player[1]}."
        tail = f" {on_target} of {len(self._current[1])} box(es) are on targets." if on_target else ""
        return f"{lead} {describe(player, self._objects())}{tail}"

    def _rules(self) -> str:
        return RULES

    # ------------------------------------------------------------------ oracle
    def _plan(self) -> list[int] | None:
        if self._level is None:
            return None
        level = self.level
        if self.config.teacher != "oracle":  # a flawed teacher (issue 38): its moves, or none
            return teacher_plan(self.config.teacher, level, self._current)

        def successors(state: State) -> Iterator[tuple[int, State]]:
            for action in range(4):
                following, kind = move(level, state, action)
                if kind.changed:
                    yield action, following

        plan = greedy_plan(self._current, self._distances.get, successors)
        # Off the generator's table (a fixed level, or the player left it): search instead.
        return plan if plan is not None else solve(level, self._current)


def make_easy(**config: Any) -> SokobanEnv:
    """VAGEN's training preset: levels solvable in at most 5 moves (``min_actions_to_succeed=5``)."""
    return SokobanEnv(**{"max_solution_steps": 5, **config})


def make_text(**config: Any) -> SokobanEnv:
    """Text-only observations (symbol grid), e.g. for LLM baselines."""
    return SokobanEnv(**{"render_mode": "text", **config})

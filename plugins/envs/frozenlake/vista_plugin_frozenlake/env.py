"""FrozenLakeEnv: VAGEN's FrozenLake (rules, rewards, symbols, prompt formats), our own code.

The map comes from ``random.Random(seed)``; slips (``is_slippery``) draw from a second stream seeded
from the same seed, so an episode is a pure function of the seed and the actions.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator
from vista_plugin_gamekit.planning import greedy_plan
from vista_plugin_gamekit.relations import describe, relations
from vista_plugin_gamekit.sprites import TileFrame
from vista_plugin_gamekit.textgame import ActionResult, GameConfig, TextGameEnv

from vista_plugin_frozenlake import render
from vista_plugin_frozenlake.lake import ACTION_NAMES, LakeMap, from_rows, generate_map, neighbour
from vista_plugin_frozenlake.teachers import teacher_plan

RULES = (
    "You are a FrozenLake solver.\n"
    "Goal: walk from your position to the goal without stepping into a hole.\n"
    "Symbols (in text observations): _ frozen ice | O hole | G goal | P you | X you in a hole | "
    "√ you on the goal. In images: light ice, dark holes, a gift box goal, and you in green.\n"
    "Rules: each action moves you one cell; walking off the edge leaves you in place; stepping into a "
    "hole ends the episode. Up is toward the top row."
)
_SLIPPERY = " The ice is slippery: a move may go sideways instead."


class FrozenLakeConfig(GameConfig):
    size: int = Field(4, ge=2, le=32, description="cells per side")
    p: float = Field(0.8, gt=0.0, le=1.0, description="probability that a cell is frozen (not a hole)")
    is_slippery: bool = False
    slip_prob: float = Field(2 / 3, ge=0.0, le=1.0,
                             description="when slippery: chance a move goes to one of its two sideways "
                                         "directions (gymnasium: 2/3)")
    random_start_goal: bool = True
    min_solution_steps: int = Field(1, ge=1)
    max_solution_steps: int | None = Field(None, ge=1)
    desc: list[str] | None = Field(None, description="a fixed map in gymnasium letters (S, F, H, G)")
    tile_size: int = Field(64, ge=4, le=256, description="pixels per cell (64 gives 256x256 for 4x4)")
    tile_style: Literal["sprites", "flat"] = Field(
        "sprites", description="sprites (VAGEN's look) or flat: one solid colour per cell kind, for maps "
        "shown at a few pixels a cell")
    success_reward: float = Field(10.0, description="gymnasium's 1 plus VAGEN's bonus of 9")
    step_penalty: float = 0.0
    hole_penalty: float = 0.0
    progress_reward: float = Field(
        0.0, description="turn-level reward: this times the drop in shortest-path distance to the goal on "
        "each move (a move away costs as much, a bump into the edge nothing), so every turn is scored")
    teacher: Literal["oracle", "goalward", "hole_blind", "coin_walk"] = Field(
        "oracle", description="whose moves oracle_response gives (SFT data): oracle (shortest path, exact), "
        "goalward (never steps away from the goal), hole_blind (row then column, ignoring holes) or "
        "coin_walk (a coin picks the row or column move toward the goal, ignoring holes); "
        "vista_plugin_frozenlake.teachers")

    @model_validator(mode="after")
    def _check(self) -> FrozenLakeConfig:
        if self.max_solution_steps is not None and self.max_solution_steps < self.min_solution_steps:
            raise ValueError("max_solution_steps must be >= min_solution_steps")
        if self.desc is not None:
            from_rows(self.desc)
        return self


class FrozenLakeEnv(TextGameEnv):
    """Walk to the goal across the ice; several actions per turn."""

    action_names = ACTION_NAMES
    goal = "reach the goal"

    def __init__(self, **config: Any) -> None:
        super().__init__(FrozenLakeConfig(**config))
        self.config: FrozenLakeConfig
        self._fixed = from_rows(self.config.desc) if self.config.desc is not None else None
        self._map: LakeMap | None = None
        self._player = 0
        self._slip = random.Random(0)
        self._frame = TileFrame()

    @property
    def lake(self) -> LakeMap:
        if self._map is None:
            raise RuntimeError("call reset() first")
        return self._map

    def _new_episode(self, seed: int) -> None:
        config = self.config
        if self._fixed is not None:
            self._map = self._fixed
        else:
            self._map = generate_map(random.Random(seed), config.size, config.p, config.min_solution_steps,
                                     config.max_solution_steps, config.random_start_goal)
        self._player = self._map.start
        self._slip = random.Random(f"frozenlake-slip:{seed}")
        self._frame.reset()

    def _apply(self, action: int) -> ActionResult:
        lake, config = self.lake, self.config
        if config.is_slippery:
            draw = self._slip.random()
            if draw < config.slip_prob / 2:
                action = (action - 1) % 4
            elif draw < config.slip_prob:
                action = (action + 1) % 4
        before = self._player
        self._player = neighbour(lake.size, before, action)
        self._frame.mark(before, self._player)
        reward = config.step_penalty + self._progress(before)
        if self._player == lake.goal:
            return ActionResult(reward + config.success_reward, True, True, True)
        if self._player in lake.holes:
            return ActionResult(reward + config.hole_penalty, True, True, False)
        return ActionResult(reward, self._player != before, False, False)

    def _progress(self, before: int) -> float:
        """``progress_reward`` x (distance before - distance after); nothing for a step into a hole
        (``hole_penalty`` prices that) or between cells that cannot reach the goal."""
        rate = self.config.progress_reward
        was, now = self.lake.distance[before], self.lake.distance[self._player]
        if not rate or was < 0 or now < 0:
            return 0.0
        return rate * (was - now)

    def _snapshot(self) -> tuple[int, Any]:
        return self._player, self._slip.getstate()

    def _restore(self, snapshot: tuple[int, Any]) -> None:
        self._frame.mark(self._player, snapshot[0])
        self._player, slip_state = snapshot
        self._slip.setstate(slip_state)

    def _oracle_chunk(self) -> int:
        return 1 if self.config.is_slippery else self.config.max_actions_per_step

    # ------------------------------------------------------------------ views
    def _kind(self, cell: int) -> int:
        lake = self.lake
        if cell == self._player:
            return (render.PLAYER_ON_GOAL if cell == lake.goal else
                    render.PLAYER_IN_HOLE if cell in lake.holes else render.PLAYER)
        return render.GOAL if cell == lake.goal else render.HOLE if cell in lake.holes else render.FROZEN

    def _image(self) -> np.ndarray:
        size = self.lake.size
        tiles = render.flat_tiles if self.config.tile_style == "flat" else render.tiles
        return self._frame.render(tiles(self.config.tile_size), size, size, self._kind)

    def _text_grid(self) -> str:
        symbols = {render.FROZEN: "_", render.HOLE: "O", render.GOAL: "G", render.PLAYER: "P",
                   render.PLAYER_IN_HOLE: "X", render.PLAYER_ON_GOAL: "√"}
        size = self.lake.size
        return "\n".join("\t".join(symbols[self._kind(row * size + col)] for col in range(size))
                         for row in range(size))

    def _state(self) -> dict[str, Any]:
        lake = self.lake
        return {
            "player": list(lake.cell(self._player)),
            "goal": list(lake.cell(lake.goal)),
            "holes": [list(lake.cell(hole)) for hole in sorted(lake.holes)],
            "in_hole": self._player in lake.holes,
            "desc": lake.rows(),
        }

    def _objects(self, near_only: bool) -> list[tuple[str, tuple[int, int]]]:
        lake = self.lake
        player = lake.cell(self._player)
        holes = [lake.cell(hole) for hole in sorted(lake.holes)]
        if near_only:
            holes = [h for h in holes if abs(h[0] - player[0]) + abs(h[1] - player[1]) == 1]
        return [("target", lake.cell(lake.goal))] + [("hole", hole) for hole in holes]

    def _relations(self) -> list[dict[str, str]]:
        return relations(self.lake.cell(self._player), self._objects(near_only=False))

    def _describe(self) -> str:
        lake = self.lake
        player = lake.cell(self._player)
        objects = self._objects(near_only=True)
        text = f"The player is at row {player[0]}, column {player[1]}. " + describe(player, objects[:1])
        text = text.replace("The target", "The goal")
        if len(objects) > 1:
            text += " " + describe(player, objects[1:]).replace("The hole is", "A hole is")
        if self._player in lake.holes:
            text += " The player has fallen into a hole."
        return text

    def _rules(self) -> str:
        return RULES + (_SLIPPERY if self.config.is_slippery else "")

    # ------------------------------------------------------------------ oracle
    def _plan(self) -> list[int] | None:
        if self._map is None:
            return None
        lake = self._map
        if self.config.teacher != "oracle":  # a flawed teacher (issue 38): its moves, even into a hole
            return teacher_plan(self.config.teacher, lake, self._player) or None
        # Holes have distance -1, so the plan never steps into one and none starts from one.
        return greedy_plan(self._player, lake.distance.__getitem__,
                           lambda cell: ((action, neighbour(lake.size, cell, action)) for action in range(4)))


def make_slippery(**config: Any) -> FrozenLakeEnv:
    """gymnasium's slippery ice (seeded), one oracle move per turn."""
    return FrozenLakeEnv(**{"is_slippery": True, **config})


def make_text(**config: Any) -> FrozenLakeEnv:
    """Text-only observations (symbol grid)."""
    return FrozenLakeEnv(**{"render_mode": "text", **config})

"""NavigationEnv: VAGEN's egocentric navigation task (actions, success threshold, rewards, prompt
formats) in seeded grid worlds rendered by our own numpy raycaster, so it runs on any CPU.

The agent sees a first-person image and an instruction ("navigate to the red ball") and succeeds
when it stands within ``success_threshold`` metres of the target object (VAGEN: 1.5 m), which pays
``success_reward`` (VAGEN: 10) and ends the episode; a well-formed turn with valid actions adds
``format_reward`` (0.5).  At most ``max_steps`` actions (VAGEN: 30) per episode.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from PIL import Image
from pydantic import Field, model_validator
from vista_plugin_gamekit.textgame import ActionResult, GameConfig, TextGameEnv

from vista_plugin_navigation import planner
from vista_plugin_navigation.raycast import Camera, Raycaster, screen_extent, to_image
from vista_plugin_navigation.world import (
    ACTION_HELP,
    ACTION_NAMES,
    HEADINGS,
    SHAPE_SIZE,
    WALL,
    Pose,
    World,
    direction_word,
    distance_cells,
    generate_world,
    next_pose,
    relative_angle,
)
from vista_rl import Observation

_FRAME_CACHE = 32  # packed frames kept per env (255x255: 260 kB each)

RULES = (
    "You are a home robot navigating a room. You see the room through your own camera (first person).\n"
    "Goal: reach the object named in the instruction; you succeed once you are within {threshold:g} m of it.\n"
    "Each move is {step:g} m; walls and objects block movement; rotations turn you by 90 degrees and the "
    "camera tilts in 30-degree steps. The floor is checkered in {step:g} m tiles.\n"
    "Action meanings: {actions}."
)


class NavigationConfig(GameConfig):
    """VAGEN's navigation settings, plus the world generator's."""

    max_actions_per_step: int = Field(5, ge=1, le=100)
    max_steps: int = Field(30, ge=1, description="actions per episode (VAGEN's _max_episode_steps)")
    format_reward: float = 0.5
    success_reward: float = Field(10.0, description="paid once when the target is reached")
    success_threshold: float = Field(1.5, gt=0, description="metres from the target's centre that count as reached")
    step_length: float = Field(0.5, gt=0, description="metres per move (one grid cell)")
    resolution: int = Field(255, ge=16, le=1024, description="image side in pixels")
    fov: float = Field(100.0, gt=10, lt=170, description="horizontal field of view in degrees")
    grid_size: int = Field(14, ge=5, le=64, description="cells per side, border walls included")
    num_objects: int = Field(4, ge=1, le=24, description="distinct coloured objects; one is the target")
    wall_density: float = Field(0.08, ge=0.0, le=0.4, description="share of interior cells that are wall blocks")
    min_solution_cells: int = Field(4, ge=1, description="fewest cell moves from the start into the goal region")
    max_solution_cells: int = Field(14, ge=1, description="most cell moves from the start into the goal region")
    fog: float = Field(0.04, ge=0.0, le=1.0, description="distance fade per cell (a depth cue)")

    @model_validator(mode="after")
    def _check_nav(self) -> NavigationConfig:
        if self.max_solution_cells < self.min_solution_cells:
            raise ValueError("max_solution_cells must be >= min_solution_cells")
        return self


class NavigationEnv(TextGameEnv):
    """Walk to the described object, seeing only a first-person image."""

    action_names = ACTION_NAMES
    goal = "reach the target object"

    def __init__(self, **config: Any) -> None:
        super().__init__(NavigationConfig(**config))
        self.config: NavigationConfig
        c = self.config
        self._camera = Camera(c.resolution, c.fov, eye_height=1.8, wall_height=5.0, fog=c.fog)
        self._raycaster = Raycaster(self._camera)
        self._world: World | None = None
        self._grid = np.zeros((1, 1), dtype=np.int8)
        self._pose = Pose(0, 0, 0, 0)
        self._blocked: list[str] = []
        self._frames: dict[Pose, np.ndarray] = {}
        self._seen: dict[Pose, tuple[tuple[str, float, str], ...]] = {}

    @property
    def world(self) -> World:
        if self._world is None:
            raise RuntimeError("call reset() first")
        return self._world

    @property
    def pose(self) -> Pose:
        return self._pose

    @property
    def instruction(self) -> str:
        return f"Navigate to the {self.world.target_object.name}."

    # ------------------------------------------------------------------ game
    def _new_episode(self, seed: int) -> None:
        c = self.config
        self._world = generate_world(random.Random(f"navigation:{seed}"), c.grid_size, c.num_objects,
                                     c.wall_density, c.success_threshold / c.step_length,
                                     c.min_solution_cells, c.max_solution_cells)
        self._grid = np.array(self._world.grid, dtype=np.int8)
        self._pose = self._world.start
        self._blocked = []
        self._frames = {}
        self._seen = {}

    def _target_distance(self, pose: Pose) -> float:
        """Metres from the agent to the target's centre."""
        return distance_cells(pose.position, self.world.target_object.centre) * self.config.step_length

    def _apply(self, action: int) -> ActionResult:
        following = next_pose(self.world, self._pose, action)
        if following is None:
            self._blocked.append(ACTION_NAMES[action])
            return ActionResult(0.0, False, False, False)
        self._pose = following
        if self._target_distance(following) <= self.config.success_threshold + 1e-9:
            return ActionResult(self.config.success_reward, True, True, True)
        return ActionResult(0.0, True, False, False)

    def _snapshot(self) -> tuple[Pose, int]:
        return self._pose, len(self._blocked)

    def _restore(self, snapshot: tuple[Pose, int]) -> None:
        self._pose, blocked = snapshot
        del self._blocked[blocked:]

    def _plan(self) -> list[int] | None:
        return planner.plan(self.world, self._pose) if self._world is not None else None

    # ------------------------------------------------------------------ views
    def _observe(self, lead: str) -> Observation:
        """VAGEN repeats the instruction with every observation."""
        return super()._observe(f"Instruction: {self.instruction}\n{lead}")

    def _feedback(self, format_ok: bool, format_feedback: str, requested: Any, chosen: Any, invalid: str | None,
                  executed: Any) -> str:
        text = super()._feedback(format_ok, format_feedback, requested, chosen, invalid, executed)
        if self._blocked:
            text += (f" These action(s) could not be executed (blocked by a wall or an object, or the camera "
                     f"is at its limit): {', '.join(self._blocked)}.")
            self._blocked = []
        return text

    def render_image(self) -> Image.Image:
        """A fresh image each call (callers may keep or edit it); the packed frame is cached per pose
        within an episode, so a view seen before costs one Pillow conversion."""
        frame = self._frames.get(self._pose)
        if frame is None:
            frame = self._raycaster.render_packed(self.world, self._grid, self._pose)
            if len(self._frames) >= _FRAME_CACHE:  # an episode has at most max_steps + 1 poses; bound memory anyway
                del self._frames[next(iter(self._frames))]
            self._frames[self._pose] = frame
        return to_image(frame)

    def _image(self) -> np.ndarray:
        return np.asarray(self.render_image())

    def _text_grid(self) -> str:
        """A top-down map for text-only models: # wall, . floor, the objects' initials, the agent
        as an arrow."""
        world, pose = self.world, self._pose
        rows = [["#" if cell == WALL else "." for cell in row] for row in world.grid]
        legend = []
        for index, obj in enumerate(world.objects):
            mark = str(index + 1)
            rows[obj.cell[0]][obj.cell[1]] = mark
            legend.append(f"{mark}={obj.name}")
        rows[pose.row][pose.col] = "^>v<"[pose.heading]
        return "\n".join("".join(row) for row in rows) + "\nObjects: " + ", ".join(legend)

    def _visible(self, pose: Pose) -> list[tuple[str, float, str]]:
        """(name, metres, direction) of the objects in the camera's view and not behind a wall:
        what a careful look at the image would report.  Nearest first; memoised per pose."""
        cached = self._seen.get(pose)
        if cached is not None:
            return list(cached)
        world = self.world
        camera = self._camera
        seen = []
        for obj in world.objects:
            width, height = SHAPE_SIZE[obj.shape]
            extent = screen_extent(camera, pose, obj.centre, width, height)
            if extent is None:
                continue
            _, left, right, top, bottom = extent
            if right < 0 or left > camera.resolution or bottom < 0 or top > camera.resolution:
                continue
            if not _line_of_sight(world, pose.position, obj.centre):
                continue
            metres = round(distance_cells(pose.position, obj.centre) * self.config.step_length, 1)
            seen.append((obj.name, metres, direction_word(relative_angle(pose, obj.centre))))
        seen.sort(key=lambda item: (item[1], item[0]))
        self._seen[pose] = tuple(seen)
        return seen

    def _state(self) -> dict[str, Any]:
        """VAGEN's navigation state (target type, distance and direction, visible objects) plus the pose."""
        world, pose = self.world, self._pose
        target = world.target_object
        distance = self._target_distance(pose)
        return {
            "instruction": self.instruction,
            "target_obj_type": target.name,
            "distance_to_target": round(distance, 2),
            "target_relative_direction": direction_word(relative_angle(pose, target.centre)),
            "visible_objects": [{"type": name, "distance": metres, "relative_direction": where}
                                for name, metres, where in self._visible(pose)],
            "agent": {"row": pose.row, "col": pose.col, "heading": HEADINGS[pose.heading], "horizon": pose.horizon},
            "success": distance <= self.config.success_threshold + 1e-9,
        }

    def _relations(self) -> list[dict[str, str]]:
        """Every object in the agent's frame, in the shape of VAGEN's relation form: the
        ``vertical_relation`` axis is ahead/behind (depth), ``horizontal_relation`` left/right."""
        pose = self._pose
        out = []
        for obj in self.world.objects:
            angle = relative_angle(pose, obj.centre)
            word = direction_word(angle)
            depth = "ahead" if word == "ahead" else "behind" if word == "back" else "same"
            side = "right" if 0 < angle < 180 else "left" if angle < 0 else "same"
            out.append({"object_id": obj.name, "vertical_relation": depth, "horizontal_relation": side})
        return out

    def _describe(self) -> str:
        pose = self._pose
        target = self.world.target_object
        metres = round(self._target_distance(pose), 1)
        where = direction_word(relative_angle(pose, target.centre))
        where_text = {"ahead": "ahead of me", "right": "to my right", "left": "to my left", "back": "behind me"}[where]
        text = f"The {target.name} is {metres:g} m away, {where_text}."
        visible = self._visible(pose)
        if visible:
            text += " In view: " + "; ".join(f"the {name} ({metres:g} m, {where})" for name, metres, where in visible) + "."
        else:
            text += " No object is in view."
        if pose.horizon:
            text += f" The camera is tilted {abs(pose.horizon)} degrees {'down' if pose.horizon > 0 else 'up'}."
        return text

    def _rules(self) -> str:
        c = self.config
        actions = "; ".join(f"{name}: {help_}" for name, help_ in zip(ACTION_NAMES, ACTION_HELP, strict=True))
        return RULES.format(threshold=c.success_threshold, step=c.step_length, actions=actions)


def _line_of_sight(world: World, start: tuple[float, float], end: tuple[float, float]) -> bool:
    """No wall cell on the segment (sampled at a twentieth of a cell; walls are whole cells)."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    samples = max(int(max(abs(dx), abs(dy)) * 20), 1)
    for i in range(1, samples):
        x, y = start[0] + dx * i / samples, start[1] + dy * i / samples
        if world.grid[int(y)][int(x)] == WALL:
            return False
    return True


def make_small(**config: Any) -> NavigationEnv:
    """A quick variant for tests and tiny models: 96x96 images, an 8x8 room, 3 objects."""
    return NavigationEnv(**{"resolution": 96, "grid_size": 8, "num_objects": 3, "min_solution_cells": 3, "max_solution_cells": 8,
                            **config})


def make_text(**config: Any) -> NavigationEnv:
    """A top-down symbol map instead of the first-person image (for text-only models and debugging)."""
    return NavigationEnv(**{"render_mode": "text", **config})

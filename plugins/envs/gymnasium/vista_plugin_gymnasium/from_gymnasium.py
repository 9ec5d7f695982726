"""A gymnasium env with a Discrete action space as a VISTA env with named actions.

The model answers ``<answer>Left, Down</answer>``; names map to action indices (the env's own names
where it has them: MiniGrid's ``Actions`` enum, ALE's ``get_action_meanings()``); frames come from the
env's own ``rgb_array`` rendering (``ansi`` for text), else from an image in the observation.  Any
observation space works (:mod:`vista_plugin_gymnasium.observations`: a mission goes into the prompt,
small arrays become text, frames are kept out of ``info``), and ids of installed env packages
resolve without a module prefix (:mod:`vista_plugin_gymnasium.peers`).  MiniGrid envs get a
breadth-first-search oracle over their grid (:mod:`vista_plugin_gymnasium.minigrid_oracle`).
Toy-text envs expose their transition table
``P``, which gives ground-truth goal/hazard cells for ``info`` and the oracle: a shortest path when
every action has one outcome, and on a stochastic table (slippery ice) the action that maximises the
probability of success within the steps left (value iteration, :mod:`vista_plugin_gymnasium.planning`).
An env without ``P`` has no exact oracle: ``oracle_response()`` is ``None`` and ``oracle_kind`` says so.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from pydantic import Field
from vista_plugin_gamekit.relations import describe, relations
from vista_plugin_gamekit.textgame import ActionResult, GameConfig, TextGameEnv

from vista_plugin_gymnasium import minigrid_oracle
from vista_plugin_gymnasium.observations import compact, is_image, same, split
from vista_plugin_gymnasium.peers import ensure_registered
from vista_plugin_gymnasium.planning import (
    SuccessPolicy,
    is_stochastic,
    steps_left,
    time_limit,
    time_limit_wrapper,
)
from vista_plugin_gymnasium.rendering import RENDER_LOCK, prepare_renderers
from vista_rl import Observation, escape_placeholders

if TYPE_CHECKING:
    from minigrid.minigrid_env import MiniGridEnv

#: Action names of well-known envs, in action-index order (from their gymnasium docs).
KNOWN_ACTIONS: dict[str, tuple[str, ...]] = {
    "FrozenLake": ("Left", "Down", "Right", "Up"),
    "FrozenLake8x8": ("Left", "Down", "Right", "Up"),
    "CliffWalking": ("Up", "Right", "Down", "Left"),
    "CliffWalkingSlippery": ("Up", "Right", "Down", "Left"),
    "Taxi": ("South", "North", "East", "West", "Pickup", "Dropoff"),
}
KNOWN_RULES: dict[str, str] = {
    "FrozenLake": "Walk from the start (top left) to the goal without falling into a hole.",
    "CliffWalking": ("Walk from the start (bottom left) to the goal (bottom right). Each move costs 1; "
                     "stepping off the cliff along the bottom row costs 100 and sends you back to the start."),
}
MINIGRID_RULES = ("A grid world seen from above; you are the red triangle, pointing where you face. left and "
                  "right turn on the spot, forward moves one cell ahead, pickup takes the object in front "
                  "(one at a time), drop puts it down, toggle opens the door in front (a locked door needs "
                  "the key of its colour), done does nothing. The mission is given with each observation.")
#: Attributes of the unwrapped env that one action changes (toy text: ``s``; MiniGrid: the rest).
_SNAPSHOT_ATTRIBUTES = ("s", "lastaction", "grid", "agent_pos", "agent_dir", "carrying", "step_count")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_HIGHLIGHTED = re.compile(r"\x1b\[(?:[0-9]+;)*4[0-7]m(.)\x1b\[0m")  # colorize(..., highlight=True)
SuccessRule = Literal["terminated", "positive_reward", "terminated_positive"]


class GymnasiumConfig(GameConfig):
    gym_id: str = Field(..., description="a gymnasium id, e.g. FrozenLake-v1")
    gym_kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to gymnasium.make")
    action_names: list[str] | None = Field(None, description="names in action-index order (default: known "
                                                              "names, then get_action_meanings())")
    success_when: SuccessRule = "terminated_positive"
    format_reward: float = 0.0
    idle_reward: float | None = Field(None, description="reward of a reply that takes no action (default: the "
                                      "smallest one-step reward in the env's transition table when it is "
                                      "negative, e.g. CliffWalking's -100, else 0)")


def _base_name(gym_id: str) -> str:
    name = gym_id.split("/")[-1].split(":")[-1]
    return name.rsplit("-v", 1)[0]


class GymnasiumEnv(TextGameEnv):
    """Any Discrete-action gymnasium env; see the module docstring."""

    def __init__(self, **config: Any) -> None:
        import gymnasium

        parsed = GymnasiumConfig(**config)
        ensure_registered(parsed.gym_id)
        prepare_renderers()
        self._gym = gymnasium.make(parsed.gym_id, render_mode=_render_mode(parsed), **parsed.gym_kwargs)
        space = self._gym.action_space
        if not isinstance(space, gymnasium.spaces.Discrete):
            self._gym.close()
            raise ValueError(f"gym_id={parsed.gym_id!r} has action space {space}; only Discrete is supported")
        self._start = int(space.start)
        self.action_names = self._names(parsed, int(space.n))
        self.goal = "finish the episode successfully"
        super().__init__(parsed)
        self.config: GymnasiumConfig
        self._obs: Any = None
        self._gym_info: dict[str, Any] = {}
        self._frame: np.ndarray | None = None
        self._minigrid = minigrid_oracle.is_minigrid(self._gym.unwrapped)
        self._table = getattr(self._gym.unwrapped, "P", None)
        self._terminal = self._terminal_states()
        self._idle_reward = self._worst_step_reward() if parsed.idle_reward is None else parsed.idle_reward
        self._stochastic = is_stochastic(self._table)
        self._policy: SuccessPolicy | None = None
        self.oracle_kind = ("breadth-first search over the MiniGrid grid to the goal square (none where the "
                            "mission has no goal square)" if self._minigrid else
                            "none: the env exposes no transition table (unwrapped.P), so there is no exact oracle"
                            if self._table is None else
                            "value iteration on the transition probabilities (best chance of success)"
                            if self._stochastic else "shortest path (deterministic transitions)")

    def _names(self, config: GymnasiumConfig, n: int) -> tuple[str, ...]:
        names: list[str] | tuple[str, ...] | None = config.action_names or KNOWN_ACTIONS.get(_base_name(config.gym_id))
        if names is None:
            names = _enum_names(getattr(self._gym.unwrapped, "actions", None), n, self._start)
        if names is None and hasattr(self._gym.unwrapped, "get_action_meanings"):
            names = [str(name) for name in self._gym.unwrapped.get_action_meanings()]
        names = tuple(names) if names is not None else tuple(f"action_{i}" for i in range(n))
        if len(names) != n or len({name.lower() for name in names}) != n:
            raise ValueError(f"action_names must be {n} distinct names for {config.gym_id}, got {list(names)}")
        return names

    # ------------------------------------------------------------------ transition table
    def _is_success(self, reward: float, terminated: bool) -> bool:
        rule = self.config.success_when
        if rule == "terminated":
            return terminated
        if rule == "positive_reward":
            return reward > 0
        return terminated and reward > 0

    def _terminal_states(self) -> dict[int, bool]:
        """state -> whether ending there is a success, from the transition table."""
        out: dict[int, bool] = {}
        for transitions in (self._table or {}).values():
            for outcomes in transitions.values():
                for probability, nxt, reward, done in outcomes:
                    if done and probability > 0:
                        out[int(nxt)] = out.get(int(nxt), False) or self._is_success(float(reward), True)
        return out

    def _worst_step_reward(self) -> float:
        """The smallest one-step reward in the transition table when negative, else 0.  Where every
        step costs (CliffWalking: -1 a step, -100 at the cliff), a reply that takes no action must cost
        at least what the worst action costs, or idling until the turn limit (0) beats reaching the
        goal (-13)."""
        rewards = [float(reward) for transitions in (self._table or {}).values()
                   for outcomes in transitions.values() for probability, _, reward, _ in outcomes if probability > 0]
        return min([0.0, *rewards])

    def idle_reward(self) -> float:
        return self._idle_reward

    def _grid_shape(self) -> tuple[int, int] | None:
        unwrapped = self._gym.unwrapped
        desc = getattr(unwrapped, "desc", None)
        if desc is not None:
            return int(desc.shape[0]), int(desc.shape[1])
        shape = getattr(unwrapped, "shape", None)
        if isinstance(shape, tuple) and len(shape) == 2:
            return int(shape[0]), int(shape[1])
        return None

    # ------------------------------------------------------------------ game hooks
    def _new_episode(self, seed: int) -> None:
        self._obs, info = self._gym.reset(seed=seed)
        self._gym_info = dict(info)
        self._frame = None

    def _apply(self, action: int) -> ActionResult:
        before = self._obs
        self._obs, reward, terminated, truncated, info = self._gym.step(action + self._start)
        self._gym_info = dict(info)
        self._frame = None
        success = self._is_success(float(reward), bool(terminated))
        effective = not same(before, self._obs)
        return ActionResult(float(reward), effective, bool(terminated) or success, success, bool(truncated))

    def _snapshot(self) -> Any:
        unwrapped = self._gym.unwrapped
        attributes = {k: v for k, v in vars(unwrapped).items() if k in _SNAPSHOT_ATTRIBUTES}
        return (self._obs, copy.deepcopy(attributes), copy.deepcopy(unwrapped.np_random.bit_generator.state),
                self._elapsed())

    def _restore(self, snapshot: Any) -> None:
        unwrapped = self._gym.unwrapped
        self._obs, attributes, rng_state, elapsed = snapshot
        for key, value in copy.deepcopy(attributes).items():  # the snapshot may be restored again
            setattr(unwrapped, key, value)
        unwrapped.np_random.bit_generator.state = rng_state
        limit = time_limit_wrapper(self._gym)
        if limit is not None:  # a look-ahead must not use up the episode's time limit
            limit._elapsed_steps = elapsed
        self._frame = None

    def _elapsed(self) -> int | None:
        limit = time_limit_wrapper(self._gym)
        return None if limit is None else limit._elapsed_steps

    def _image(self) -> np.ndarray:
        if self._frame is None:
            frame = None
            if self._gym.render_mode == "rgb_array":
                with RENDER_LOCK:
                    frame = self._gym.render()
            if frame is None:
                images = split(self._obs).images
                if not images:
                    raise ValueError(f"{self.config.gym_id} has no rgb_array rendering and no image in its "
                                     "observation; use render_mode='text'")
                frame = images[0]
            self._frame = np.asarray(frame, dtype=np.uint8)
        return self._frame

    def _grid_env(self) -> MiniGridEnv:
        """The MiniGrid env under the wrappers; only when ``self._minigrid`` (minigrid is an optional peer)."""
        return cast("MiniGridEnv", self._gym.unwrapped)

    def _text_grid(self) -> str:
        unwrapped = self._gym.unwrapped
        with RENDER_LOCK:
            if self._gym.render_mode == "ansi":
                text = self._gym.render()
            elif "ansi" in (unwrapped.metadata or {}).get("render_modes", []):
                mode = unwrapped.render_mode
                unwrapped.render_mode = "ansi"  # toy-text envs read the mode at call time
                try:
                    text = unwrapped.render()
                finally:
                    unwrapped.render_mode = mode
            else:
                text = None
        if text is None and self._minigrid:
            return self._grid_env().pprint_grid()  # 2 characters a cell: object + colour; the agent as >>, VV, <<, ^^
        if text is None:
            return self._observation_text()
        marker = "P" if self._grid_shape() is not None else r"[\1]"
        return _ANSI_ESCAPE.sub("", _HIGHLIGHTED.sub(marker, str(text))).strip("\n")

    def _observation_text(self) -> str:
        """Text of an observation without an ``ansi`` rendering: its small values, frames by size."""
        if isinstance(self._obs, (int, np.integer)):
            return f"Observation: {self._obs}"
        parts = split(self._obs)
        lines = parts.text + [f"(an image of {image.shape[1]}x{image.shape[0]} pixels)" for image in parts.images]
        return "\n".join(lines) or "Observation: (nothing to show as text)"

    def _observe(self, lead: str) -> Observation:
        """The game's observation plus the mission (and, in vision mode, the small values) of a
        structured observation, which no rendering shows."""
        observation = super()._observe(lead)
        if isinstance(self._obs, (int, np.integer)) or is_image(self._obs):
            return observation
        parts = split(self._obs)
        extra = parts.prompt + (parts.text if self.config.render_mode == "vision" else [])
        if not extra:
            return observation
        return Observation(observation.text + "\n" + escape_placeholders("\n".join(extra)), observation.images)

    def _position(self) -> tuple[int, int] | None:
        if self._minigrid:
            x, y = self._grid_env().agent_pos
            return int(y), int(x)  # (row, column), as the grid games count
        shape = self._grid_shape()
        if shape is None or not isinstance(self._obs, (int, np.integer)):
            return None
        return divmod(int(self._obs), shape[1])

    def _objects(self) -> list[tuple[str, tuple[int, int]]]:
        if self._minigrid:
            grid = self._grid_env().grid
            names = {"goal": "goal", "lava": "hazard", "key": "key", "door": "door", "ball": "ball", "box": "box"}
            return [(names[cell.type], (index // grid.width, index % grid.width))
                    for index, cell in enumerate(grid.grid) if cell is not None and cell.type in names]
        shape = self._grid_shape()
        if shape is None:
            return []
        return [("goal" if success else "hazard", divmod(state, shape[1]))
                for state, success in sorted(self._terminal.items())]

    def _state(self) -> dict[str, Any]:
        """JSON-ready and small: a frame is stored by reference (see :func:`observations.compact`)."""
        obs = self._obs
        state: dict[str, Any] = {"observation": int(obs) if isinstance(obs, (int, np.integer)) else compact(obs)}
        position = self._position()
        if position is not None:
            state["player"] = list(position)
        if self._minigrid:
            unwrapped = self._grid_env()
            carrying = unwrapped.carrying
            state["direction"] = int(unwrapped.agent_dir)
            state["carrying"] = None if carrying is None else f"{carrying.color} {carrying.type}"
        if self._gym_info:
            state["gym_info"] = compact(self._gym_info)
        return state

    def _relations(self) -> list[dict[str, str]]:
        position = self._position()
        return relations(position, self._objects()) if position is not None else []

    def _describe(self) -> str:
        position = self._position()
        if position is None:
            return f"The observation is {self._state()['observation']}."
        near = [(name, cell) for name, cell in self._objects()
                if name == "goal" or abs(cell[0] - position[0]) + abs(cell[1] - position[1]) == 1]
        return f"The player is at row {position[0]}, column {position[1]}. {describe(position, near)}".strip()

    def _rules(self) -> str:
        default = MINIGRID_RULES if self._minigrid else "Reach a successful end of the episode."
        rules = KNOWN_RULES.get(_base_name(self.config.gym_id), default)
        return f"You are playing the gymnasium environment {self.config.gym_id}.\n{rules}"

    def _plan(self) -> list[int] | None:
        """The oracle's actions from here: see ``oracle_kind``."""
        if self._minigrid:
            unwrapped = self._gym.unwrapped
            return minigrid_oracle.plan(unwrapped) if minigrid_oracle.has_goal(unwrapped) else None
        if self._table is None or not isinstance(self._obs, (int, np.integer)):
            return None
        if self._stochastic:
            return self._best_chance()
        return self._shortest_path(int(self._obs))

    def _best_chance(self) -> list[int] | None:
        """One action: the one with the highest probability of success within the steps left (the
        outcome decides the next one, so planning further ahead would be a guess)."""
        assert self._table is not None
        if self._policy is None:
            actions = [action + self._start for action in range(len(self.action_names))]
            horizon = min(self.config.max_steps, time_limit(self._gym) or self.config.max_steps)
            self._policy = SuccessPolicy(self._table, actions, self._is_success, horizon)
        gym_left = steps_left(self._gym)
        left = self.config.max_steps - self._steps  # this env's own step limit, then gymnasium's TimeLimit
        state, left = int(self._obs), left if gym_left is None else min(left, gym_left)
        return [self._policy.action(state, left)]

    def _shortest_path(self, start: int) -> list[int] | None:
        """Breadth-first search over the (single) outcomes of ``P`` to a successful end."""
        assert self._table is not None
        parents: dict[int, tuple[int, int] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            for action in range(len(self.action_names)):
                outcomes = self._table[state][action + self._start]
                probability, nxt, reward, done = max(outcomes, key=lambda outcome: outcome[0])
                nxt = int(nxt)
                if done and self._is_success(float(reward), True):
                    plan = [action]
                    while parents[state] is not None:
                        state, previous_action = parents[state]  # type: ignore[misc]
                        plan.append(previous_action)
                    return plan[::-1]
                if not done and nxt not in parents:
                    parents[nxt] = (state, action)
                    queue.append(nxt)
        return None

    def _oracle_chunk(self) -> int:
        return 1 if self._stochastic else self.config.max_actions_per_step

    def close(self) -> None:
        super().close()
        self._gym.close()


def _render_mode(config: GymnasiumConfig) -> str | None:
    """``rgb_array`` for images, ``ansi`` for text, where the env offers it (``None`` otherwise:
    ALE refuses an unknown mode; MiniGrid has no ``ansi``)."""
    import gymnasium

    wanted = "rgb_array" if config.render_mode in ("vision", "both") else "ansi"
    try:
        spec = gymnasium.spec(config.gym_id)
        creator = (gymnasium.envs.registration.load_env_creator(spec.entry_point)
                   if isinstance(spec.entry_point, str) else spec.entry_point)
        modes = (getattr(creator, "metadata", None) or {}).get("render_modes")
    except Exception:  # noqa: BLE001 - gymnasium.make reports an unknown id better than we can
        return wanted
    return wanted if modes is None or wanted in modes else None


def _enum_names(actions: Any, n: int, start: int) -> tuple[str, ...] | None:
    """Member names of an action enum (MiniGrid's ``Actions``) when it covers exactly the n actions."""
    try:
        if not isinstance(actions, type):
            return None
        members = sorted(cast("Iterable[Any]", actions), key=int)  # an Enum class iterates its members
        if [int(member) for member in members] != list(range(start, start + n)):
            return None
        return tuple(str(member.name) for member in members)
    except TypeError:
        return None


def make_frozenlake(**config: Any) -> GymnasiumEnv:
    """gymnasium's FrozenLake-v1 (not slippery by default, as in VAGEN; pass gym_kwargs to change)."""
    config.setdefault("gym_kwargs", {"is_slippery": False})
    return GymnasiumEnv(**{"gym_id": "FrozenLake-v1", "success_when": "terminated_positive", **config})


def make_cliffwalking(**config: Any) -> GymnasiumEnv:
    """gymnasium's CliffWalking-v1 (success: reaching the goal, which ends the episode)."""
    return GymnasiumEnv(**{"gym_id": "CliffWalking-v1", "success_when": "terminated", **config})

"""A VISTA env as a ``gymnasium.Env`` whose actions are text (the model's raw response).

Observations are ``{"text": str, "images": tuple of HxWx3 uint8 arrays}``; reward, terminated,
truncated and info pass through.  Lets gymnasium tooling (wrappers, vector envs, ``check_env``)
drive any VISTA env, e.g. ``VistaGymEnv("sokoban/sokoban-v0", render_mode="rgb_array")``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

import vista_rl
from vista_rl import Env, Observation


class AnyText(spaces.Text):
    """A Text space that contains any string up to ``max_length`` (models write any characters)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


class VistaGymEnv(gymnasium.Env):  # type: ignore[misc]
    """See the module docstring.  ``image_shape`` fixes the observation space's image shape; by
    default it is probed from ``reset(seed=0)`` (envs with varying image sizes should pass one)."""

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 4}

    def __init__(self, env: str | Env, render_mode: str | None = None,
                 image_shape: tuple[int, int, int] | None = None, max_text_length: int = 1 << 20,
                 **config: Any) -> None:
        self.env = vista_rl.make_env(env, **config) if isinstance(env, str) else env
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        if image_shape is None:
            probe, _ = self.env.reset(seed=0)
            image_shape = np.asarray(probe.images[0]).shape if probe.images else (1, 1, 3)
        self.action_space = AnyText(max_length=max_text_length, min_length=0)
        self.observation_space = spaces.Dict({
            "text": AnyText(max_length=max_text_length, min_length=0),
            "images": spaces.Sequence(spaces.Box(0, 255, shape=tuple(image_shape), dtype=np.uint8), stack=False),
        })
        self._last: Observation | None = None

    def _convert(self, observation: Observation) -> dict[str, Any]:
        self._last = observation
        images = tuple(np.asarray(image.convert("RGB"), dtype=np.uint8) for image in observation.images)
        return {"text": observation.text, "images": images}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        observation, info = self.env.reset(seed=episode_seed)
        return self._convert(observation), info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        return self._convert(result.observation), result.reward, result.terminated, result.truncated, result.info

    def render(self) -> Any:
        if self._last is None or self.render_mode is None:
            return None
        if self.render_mode == "ansi":
            return self._last.text
        return np.asarray(self._last.images[-1].convert("RGB")) if self._last.images else None

    def close(self) -> None:
        self.env.close()

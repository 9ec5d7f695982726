"""A VISTA env as a ``gymnasium.Env`` whose actions are text (the model's raw response).

Observations are ``{"text": str, "images": uint8 array (max_images, H, W, 3), "image_count": int}``
(fixed shapes, so ``AsyncVectorEnv``'s shared memory works: :mod:`vista_plugin_gymnasium.gym_spaces`);
images of another size, such as a tool's zoom, are scaled to fit inside ``H x W``.
``image_space="sequence"`` gives the older ``{"text", "images": tuple of HxWx3 arrays}`` with each
image at its own size, which only works without shared memory (``SyncVectorEnv``, or
``AsyncVectorEnv(..., shared_memory=False)``).  Reward, terminated, truncated and info pass through.
Lets gymnasium tooling (wrappers, vector envs, ``check_env``) drive any VISTA env, e.g.
``VistaGymEnv("sokoban/sokoban-v0", render_mode="rgb_array")``.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces

import vista_rl
from vista_plugin_gymnasium.gym_spaces import AnyText, pack
from vista_plugin_gymnasium.gym_spaces import image_space as fixed_image_space
from vista_rl import Env, Observation

__all__ = ["AnyText", "VistaGymEnv"]


class VistaGymEnv(gymnasium.Env):  # type: ignore[misc]
    """See the module docstring.  ``image_shape`` (H, W, 3) and ``max_images`` fix the image part of
    the observation space; by default both are probed from ``reset(seed=0)`` (at least one image
    slot).  An observation with more images than ``max_images`` raises an error naming the option."""

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 4}

    def __init__(self, env: str | Env, render_mode: str | None = None,
                 image_shape: tuple[int, int, int] | None = None, max_text_length: int = 1 << 20,
                 max_images: int | None = None, image_space: Literal["fixed", "sequence"] = "fixed",
                 **config: Any) -> None:
        if image_space not in ("fixed", "sequence"):
            raise ValueError(f"image_space must be 'fixed' or 'sequence', got {image_space!r}")
        self.env = vista_rl.make_env(env, **config) if isinstance(env, str) else env
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        if image_shape is None or max_images is None:
            probe, _ = self.env.reset(seed=0)
            if image_shape is None:
                image_shape = np.asarray(probe.images[0].convert("RGB")).shape if probe.images else (1, 1, 3)
            if max_images is None:
                max_images = max(1, len(probe.images))
        if len(image_shape) != 3 or image_shape[2] != 3 or min(image_shape) < 1:
            raise ValueError(f"image_shape must be (height, width, 3), got {image_shape}")
        if max_images < 1:
            raise ValueError(f"max_images must be at least 1, got {max_images}")
        self.image_shape: tuple[int, int, int] = (int(image_shape[0]), int(image_shape[1]), 3)
        self.max_images = int(max_images)
        self.image_space = image_space
        self.action_space = AnyText(max_length=max_text_length, min_length=0)
        text = AnyText(max_length=max_text_length, min_length=0)
        if image_space == "fixed":
            self.observation_space = spaces.Dict({
                "text": text,
                "images": fixed_image_space(self.max_images, self.image_shape),
                "image_count": spaces.Discrete(self.max_images + 1),
            })
        else:
            self.observation_space = spaces.Dict({
                "text": text,
                "images": spaces.Sequence(spaces.Box(0, 255, shape=self.image_shape, dtype=np.uint8), stack=False),
            })
        self._last: Observation | None = None

    def _convert(self, observation: Observation) -> dict[str, Any]:
        self._last = observation
        if self.image_space == "sequence":
            images = tuple(np.asarray(image.convert("RGB"), dtype=np.uint8) for image in observation.images)
            return {"text": observation.text, "images": images}
        block, count = pack(observation.images, self.max_images, self.image_shape)
        return {"text": observation.text, "images": block, "image_count": count}

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

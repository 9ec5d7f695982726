"""Gymnasium for VISTA, both ways.

- :mod:`vista_plugin_gymnasium.from_gymnasium`: a gymnasium env with a discrete action space (and
  ``rgb_array``/``ansi`` rendering) as a VISTA env whose actions are names like ``Left``.
- :mod:`vista_plugin_gymnasium.to_gymnasium`: a VISTA env as a ``gymnasium.Env`` with text actions.
- The turn kit (prompt formats, multi-action turns, relations, experts) lives in :mod:`vista_plugin_gamekit`.

Kept import-light: gymnasium itself loads only when an env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("gymnasium/FrozenLake-v1", "vista_plugin_gymnasium.from_gymnasium:make_frozenlake",
             description="gymnasium's FrozenLake-v1 rendered by gymnasium, actions Left/Down/Right/Up")
    register("gymnasium/CliffWalking-v1", "vista_plugin_gymnasium.from_gymnasium:make_cliffwalking",
             description="gymnasium's CliffWalking-v1 rendered by gymnasium, actions Up/Right/Down/Left")
    register("gymnasium/make-v0", "vista_plugin_gymnasium.from_gymnasium:GymnasiumEnv",
             description="any gymnasium env with a Discrete action space: gym_id=..., action_names=[...]")

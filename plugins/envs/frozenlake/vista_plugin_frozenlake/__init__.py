"""FrozenLake for VISTA: VAGEN's rules, rewards and prompt formats on a fast numpy implementation.

Kept import-light: map generation and rendering load only when an env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("frozenlake/frozenlake-v0", "vista_plugin_frozenlake.env:FrozenLakeEnv",
             description="FrozenLake (VAGEN defaults: 4x4, p=0.8, not slippery, vision, grounding_worldmodeling)")
    register("frozenlake/frozenlake-slippery-v0", "vista_plugin_frozenlake.env:make_slippery",
             description="FrozenLake on slippery ice (seeded slips)")
    register("frozenlake/frozenlake-text-v0", "vista_plugin_frozenlake.env:make_text",
             description="FrozenLake with a text symbol grid instead of an image")

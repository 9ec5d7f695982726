"""Sokoban for VISTA: VAGEN's rules, rewards and prompt formats on a fast numpy implementation.

Kept import-light: generation, solver and rendering load only when an env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("sokoban/sokoban-v0", "vista_plugin_sokoban.env:SokobanEnv",
             description="Sokoban (VAGEN defaults: 6x6, 1 box, vision, grounding_worldmodeling, 3 actions/turn)")
    register("sokoban/sokoban-easy-v0", "vista_plugin_sokoban.env:make_easy",
             description="Sokoban levels solvable in at most 5 moves (VAGEN's training filter)")
    register("sokoban/sokoban-text-v0", "vista_plugin_sokoban.env:make_text",
             description="Sokoban with a text symbol grid instead of an image")

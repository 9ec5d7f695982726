"""Egocentric navigation for VISTA: VAGEN's navigation task (actions, 1.5 m success, +10 / +0.5
rewards, prompt formats) in seeded grid worlds seen through a numpy raycaster, so it runs on a CPU.

Kept import-light: the world generator and renderer load only when an env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("navigation/navigation-v0", "vista_plugin_navigation.env:NavigationEnv",
             description="First-person navigation to a described object (VAGEN actions and rewards; 255x255 "
                         "raycast view, 14x14 room, 4 objects)")
    register("navigation/navigation-small-v0", "vista_plugin_navigation.env:make_small",
             description="Navigation, small: 96x96 view, 8x8 room, 3 objects")
    register("navigation/navigation-text-v0", "vista_plugin_navigation.env:make_text",
             description="Navigation with a top-down text map instead of the image")

"""Ray env workers: envs that need their own process or machine, used like local envs.

Kept import-light: Ray loads only when a pool or a ``ray`` env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "ray",
        "vista_plugin_ray.pool:make_ray_env",
        description="An env run in a Ray actor: ray(env=ID, config={...}, recovery='replay'|'fail').",
    )
    register(
        "ray/*",
        "vista_plugin_ray.pool:make_ray_env",
        route_argument="env",
        description="ray/<env id>: that env in its own Ray actor (config={...}, recovery=...).",
    )

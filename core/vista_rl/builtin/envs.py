"""Built-in env wrappers (they wrap any registered env, so they belong to no plugin)."""

from __future__ import annotations

from typing import Any

from vista_rl.hookspecs import hookimpl


@hookimpl
def register_envs(register: Any) -> None:
    register("vista/blank-images", "vista_rl.baselines:BlankImagesEnv",
             description="Any env with every image blanked (same size, same text): the image ablation")

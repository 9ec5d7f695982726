"""Built-in env wrappers (they wrap any registered env, so they belong to no plugin)."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterEnv, hookimpl


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register("vista/blank-images", "vista_rl.baselines:BlankImagesEnv",
             description="Any env with every image blanked (same size, same text): the image ablation")

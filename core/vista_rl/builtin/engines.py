"""Built-in training engines."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterEngine, hookimpl


@hookimpl
def register_engines(register: RegisterEngine) -> None:
    register("local", "vista_rl.engine.trainer:LocalEngine",
             description="One process, one device (CPU or CUDA): SFT, GRPO and PPO with a value head")

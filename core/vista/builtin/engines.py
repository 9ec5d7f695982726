"""Built-in training engines."""

from __future__ import annotations

from typing import Any

from vista.hookspecs import hookimpl


@hookimpl
def register_engines(register: Any) -> None:
    register("local", "vista.engine.trainer:LocalEngine",
             description="One process, one device (CPU or CUDA): SFT, GRPO and PPO with a value head")

"""Built-in model backends."""

from __future__ import annotations

from typing import Any

from vista_rl.hookspecs import hookimpl


@hookimpl
def register_models(register: Any) -> None:
    register("scripted", "vista_rl.backends.scripted:ScriptedBackend",
             description="Replays an env's oracle or a fixed list of responses (tests, baselines)")

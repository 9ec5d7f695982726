"""Built-in model backends."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterModel, hookimpl


@hookimpl
def register_models(register: RegisterModel) -> None:
    register("scripted", "vista_rl.backends.scripted:ScriptedBackend",
             description="Replays an env's oracle or a fixed list of responses (tests, baselines)")

"""Built-in model backends."""

from __future__ import annotations

from typing import Any

from vista.hookspecs import hookimpl


@hookimpl
def register_models(register: Any) -> None:
    register("scripted", "vista.backends.scripted:ScriptedBackend",
             description="Replays an env's oracle or a fixed list of responses (tests, baselines)")

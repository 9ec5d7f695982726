"""The verl engine for VISTA.

Kept import-light: verl (and torch) load only when the engine runs or verl imports our hooks.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_engines(register: vista_rl.RegisterEngine) -> None:
    register("verl", "vista_plugin_verl.engine:VerlEngine",
             description="Train on Ray with verl's workers: composes verl's config and runs verl.trainer.main_ppo.")


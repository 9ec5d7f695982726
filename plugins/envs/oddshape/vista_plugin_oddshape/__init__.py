"""The odd-colour env: a small real visual task that shows the whole plugin path.

Kept import-light: the env module (and Pillow drawing) loads only when the env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "oddshape/odd-colour-v0",
        "vista_plugin_oddshape.env:OddColourEnv",
        description="Which cell holds the shape with the odd colour? One turn, seeded images.",
    )

"""Count the objects: a seeded image with N shapes; answer how many there are, with feedback and retries.

This module is imported whenever VISTA loads plugins, so it stays light: it registers lazy
``"module:Object"`` targets and the env module (Pillow drawing) loads only when an env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "count-objects/count-objects-v0",
        "vista_plugin_count_objects.env:CountObjectsEnv",
        description="How many shapes are in the image? Seeded, 1-9 objects, one answer.",
        # Keyword arguments for vista_rl_sdk.check_env in tests/test_*_conformance.py.
        check_args={"config": {"max_objects": 12}},
    )
    register(
        "count-objects/count-circles-v0",
        "vista_plugin_count_objects.env:count_circles",
        description="Count only the circles among distractor shapes; two attempts with feedback.",
        check_args={"config": {"max_attempts": 3}},
    )

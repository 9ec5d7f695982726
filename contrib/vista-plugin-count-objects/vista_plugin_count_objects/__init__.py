"""Count the objects: a seeded image with N shapes; answer how many there are, with feedback and retries

This module is imported whenever VISTA loads plugins, so keep it light: register lazy
``"module:Object"`` targets and import heavy things (Pillow drawing, simulators) only in the env
module, which loads when the env is made.
"""

from __future__ import annotations

from typing import Any

import vista


@vista.hookimpl
def register_envs(register: Any) -> None:
    register(
        "count-objects/count-objects-v0",
        "vista_plugin_count_objects.env:CountObjectsEnv",
        description="Name the colour of the square among distractor circles. One turn, seeded images.",
        # Keyword arguments for vista_sdk.check_env in tests/test_*_conformance.py.
        check_args={"config": {"distractors": 3}},
    )

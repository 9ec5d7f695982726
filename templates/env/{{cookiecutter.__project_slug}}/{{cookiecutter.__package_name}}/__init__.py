"""{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}

This module is imported whenever VISTA loads plugins, so keep it light: register lazy
``"module:Object"`` targets and import heavy things (Pillow drawing, simulators) only in the env
module, which loads when the env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}-v0",
        "{{ cookiecutter.__package_name }}.{{ cookiecutter.__item_module }}:{{ cookiecutter.__item_prefix }}Env",
        description="{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}",  # vista new --description
        # Keyword arguments for vista_rl_sdk.check_env in tests/test_*_conformance.py.
        check_args={"config": {"distractors": 3}},
    )

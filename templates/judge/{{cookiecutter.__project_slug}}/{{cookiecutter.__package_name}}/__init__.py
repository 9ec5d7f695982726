"""{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}

This module is imported whenever VISTA loads plugins, so keep it light: register lazy
``"module:Object"`` targets; the judge module loads only when the judge is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_judges(register: vista_rl.RegisterJudge) -> None:
    register(
        "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}",
        "{{ cookiecutter.__package_name }}.{{ cookiecutter.__item_module }}:{{ cookiecutter.__item_prefix }}Judge",
        description="{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}",  # vista new --description
        # Keyword arguments for vista_rl_sdk.check_judge in tests/test_*_conformance.py.
        check_args={"reference": "42", "correct": "42.0", "wrong": ["39", "44.5", "forty-two", "-42"]},
    )

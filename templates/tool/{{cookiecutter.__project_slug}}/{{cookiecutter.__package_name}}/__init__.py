"""{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}

This module is imported whenever VISTA loads plugins, so keep it light: register lazy
``"module:Object"`` targets; the tool module (and Pillow) loads only when the tool is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_tools(register: vista_rl.RegisterTool) -> None:
    register(
        "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}",
        "{{ cookiecutter.__package_name }}.{{ cookiecutter.__item_module }}:{{ cookiecutter.__item_prefix }}Tool",
        description="{{ cookiecutter.description | replace('\\', '\\\\') | replace('"', '\\"') }}",  # vista new --description
        # Keyword arguments for vista_rl_sdk.check_tool in tests/test_*_conformance.py.
        check_args={"valid_arguments": {"angle": 90, "image_index": 0}},
    )

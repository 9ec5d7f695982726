"""VISTA plugin: the ``transformers`` model backend, ``vista serve`` and ``vista model init-tiny``.

Import-light: torch and transformers load only when a backend is made or a command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import vista_rl

if TYPE_CHECKING:
    import click


@vista_rl.hookimpl
def register_models(register: vista_rl.RegisterModel) -> None:
    register(
        "transformers",
        "vista_plugin_transformers.backend:TransformersBackend",
        description="Any Hugging Face image-text-to-text model (AutoModelForImageTextToText), CPU or CUDA",
    )


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_plugin_transformers.commands import init_tiny_command, model_group, serve_command

    group = model_group(cli.commands.get("model"))
    group.add_command(init_tiny_command)
    if "model" not in cli.commands:
        cli.add_command(group)
    cli.add_command(serve_command)

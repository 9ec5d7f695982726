"""The environment server: host any registered env over HTTP and use it remotely as a vista Env.

Kept import-light: FastAPI, uvicorn and httpx load only when the server starts or a remote env is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import vista_rl

if TYPE_CHECKING:
    import click


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "remote",
        "vista_plugin_envserver.client:RemoteEnv",
        description="An env hosted by `vista env-server`: remote(url=..., env=..., token=..., config={...}).",
    )
    register(
        "remote/*",
        "vista_plugin_envserver.client:RemoteEnv",
        route_argument="env",
        description="remote/<env id>: the env <env id> on a `vista env-server` (url=..., token=..., config={...}).",
    )


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_plugin_envserver.cli import env_server_command

    cli.add_command(env_server_command)

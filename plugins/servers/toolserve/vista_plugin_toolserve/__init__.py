"""Tools as services: any registered tool held once in Ray actors or an HTTP tool server.

``ray/<tool id>`` and ``http/<tool id>`` are tool ids like any other, so a run moves a tool out of
process from config (``rollout.tools``) without touching the env.  Import-light: Ray, uvicorn and
httpx load only when a served tool is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import vista_rl

if TYPE_CHECKING:
    import click


@vista_rl.hookimpl
def register_tools(register: vista_rl.RegisterTool) -> None:
    register("ray/*", "vista_plugin_toolserve.services:ray_tool", route_argument="tool",
             description="ray/<tool id>: that tool in Ray actors, loaded once (config={...}, replicas=N, name=...)")
    register("http/*", "vista_plugin_toolserve.services:http_tool", route_argument="tool",
             description="http/<tool id>: that tool on a tool server (url=...; none: a managed local server)")


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_plugin_toolserve.cli import tool_server_command

    cli.add_command(tool_server_command)

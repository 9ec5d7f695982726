"""``vista tool-server``: host registered tools over HTTP for many rollout workers."""

from __future__ import annotations

import os
import sys

import click

from vista_plugin_toolserve.http_client import TOKEN_ENV_VAR
from vista_rl import ConfigError
from vista_rl.config import apply_overrides


@click.command("tool-server")
@click.option("--tool", "tool_ids", multiple=True, required=True,
              help="Registered tool id to host (repeat to host several).")
@click.option("--set", "overrides", multiple=True, metavar="TOOL_ID:KEY=VALUE",
              help="Tool config, e.g. --set detection/grounding-dino:model=/ckpt/gdino.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Anything but loopback exposes the tools to the network: use --token.")
@click.option("--port", default=8790, show_default=True, type=int)
@click.option("--token", default=None, help=f"Require 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV_VAR}).")
@click.option("--threads", default=16, show_default=True, type=click.IntRange(1),
              help="Calls run at once (concurrent calls reach batching tools together).")
@click.option("--max-body-mb", default=64.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Largest call body in MB (413 past it, refused while it streams in).")
@click.option("--max-image-pixels", default=4096 * 4096, show_default=True, type=click.IntRange(1),
              help="Largest image (width x height) a call may carry (400 past it, checked before decoding).")
@click.option("--max-request-pixels", default=2 * 4096 * 4096, show_default=True, type=click.IntRange(1),
              help="Pixels of all a call's images together (400 past it).")
def tool_server_command(tool_ids: tuple[str, ...], overrides: tuple[str, ...], host: str, port: int,
                        token: str | None, threads: int, max_body_mb: float, max_image_pixels: int,
                        max_request_pixels: int) -> None:
    """Load each tool once and serve it: POST /call (msgpack), GET /tools, GET /health."""
    import vista_rl
    from vista_plugin_toolserve.http_server import serve
    from vista_rl.limits import ImageLimits
    from vista_rl.serving import exposure_warning

    for tool_id in tool_ids:
        vista_rl.host().spec("tools", tool_id)  # unknown ids fail now, with suggestions
    configs: dict[str, dict[str, object]] = {tool_id: {} for tool_id in tool_ids}
    for override in overrides:
        tool_id, sep, assignment = override.partition(":")
        if not sep or tool_id not in configs:
            raise click.BadParameter(f"{override!r}: write TOOL_ID:KEY=VALUE for a hosted tool", param_hint="--set")
        try:
            configs[tool_id] = apply_overrides(configs[tool_id], [assignment])
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--set") from None
    token = token or os.environ.get(TOKEN_ENV_VAR) or None
    warning = exposure_warning(host, token, "call these tools")
    if warning:
        print(warning, file=sys.stderr)
    click.echo(f"serving {', '.join(tool_ids)} on http://{host}:{port}")
    serve(configs, host, port, token, threads, max_body_bytes=int(max_body_mb * 1024 * 1024),
          image_limits=ImageLimits(max_image_pixels=max_image_pixels, max_request_pixels=max_request_pixels))

"""``vista env-server``: host registered envs over HTTP."""

from __future__ import annotations

import os
import sys

import click

from vista_plugin_envserver.client import TOKEN_ENV_VAR
from vista_rl import ConfigError
from vista_rl.config import apply_overrides


@click.command("env-server")
@click.option("--env", "env_ids", multiple=True, required=True,
              help="Registered env id to host (repeat to host several; the first is the default).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Anything but loopback exposes the envs to the network: use --token.")
@click.option("--port", default=8765, show_default=True, type=int)
@click.option("--token", default=None, help=f"Require 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV_VAR}).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Default env config for every session, e.g. --set render_mode=vision.")
@click.option("--max-sessions", default=1024, show_default=True, type=click.IntRange(1))
@click.option("--idle-timeout", default=600.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds after which an unused session is closed.")
@click.option("--max-body-mb", default=8.0, show_default=True, type=click.FloatRange(min=0.001))
@click.option("--max-batch", default=1024, show_default=True, type=click.IntRange(1),
              help="Most sessions one reset/step request may move.")
@click.option("--threads", default=4, show_default=True, type=click.IntRange(1),
              help="Worker threads that run env calls (the event loop never blocks on an env).")
@click.option("--no-client-config", is_flag=True, help="Refuse per-session env config from clients.")
@click.option("--client-config", "client_config", multiple=True, metavar="KEY[=MIN..MAX|A|B]",
              help="Allow clients to set only these env config keys, each optionally bounded "
                   "(repeat: --client-config size=2..8 --client-config slippery=true|false). "
                   "Without it any key, with small values only.")
@click.option("--max-image-pixels", default=4096 * 4096, show_default=True, type=click.IntRange(1),
              help="Largest image (width x height) a session may render; larger configs are refused.")
@click.option("--records-root", default=None, type=click.Path(exists=True, file_okay=False, resolve_path=True),
              help="Folder that image paths in client-supplied records resolve inside (absolute paths, '..' "
                   "and symlinks out are refused). Without it, client records may carry only inline "
                   "data:image/...;base64, images.")
@click.option("--max-observe-calls", default=256, show_default=True, type=click.IntRange(1),
              help="Most tool calls POST /observe may show one session per episode (item error past it).")
@click.option("--max-observe-mb", default=4.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Most memory (MiB) what POST /observe shows one session may cost per episode.")
def env_server_command(env_ids: tuple[str, ...], host: str, port: int, token: str | None,
                       overrides: tuple[str, ...], max_sessions: int, idle_timeout: float, max_body_mb: float,
                       max_batch: int, threads: int, no_client_config: bool, client_config: tuple[str, ...],
                       max_image_pixels: int, records_root: str | None, max_observe_calls: int,
                       max_observe_mb: float) -> None:
    """Serve many sessions of registered envs: batched reset/step, binary images, optional auth."""
    import vista_rl
    from vista_plugin_envserver.app import ServerSettings
    from vista_plugin_envserver.limits import ClientLimits, parse_key_rule
    from vista_plugin_envserver.observe_limits import ObserveLimits
    from vista_plugin_envserver.server import serve
    from vista_rl.serving import exposure_warning

    for env_id in env_ids:
        vista_rl.host().spec("envs", env_id)  # unknown ids fail now, with suggestions, not on first use
    try:
        defaults = apply_overrides({}, overrides)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    try:
        allowed = dict(parse_key_rule(text) for text in client_config) if client_config else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--client-config") from None
    token = token or os.environ.get(TOKEN_ENV_VAR) or None
    warning = exposure_warning(host, token, "run the envs")
    if warning:
        click.secho(warning, fg="yellow", err=True)
    settings = ServerSettings(
        env_ids=list(env_ids),
        env_config={env_id: defaults for env_id in env_ids},
        token=token,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_batch=max_batch,
        allow_client_config=not no_client_config,
        threads=threads,
        limits=ClientLimits(allowed=allowed, max_image_pixels=max_image_pixels,
                            max_observation_pixels=max(max_image_pixels, 4 * max_image_pixels)),
        records_root=records_root,
        observe=ObserveLimits(max_calls_per_episode=max_observe_calls,
                              max_bytes_per_episode=int(max_observe_mb * 1024 * 1024)),
    )
    click.echo(f"vista env-server: {', '.join(env_ids)} on http://{host}:{port}"
               f"{' (bearer token required)' if token else ''}", err=True)
    sys.stderr.flush()
    serve(settings, host=host, port=port)

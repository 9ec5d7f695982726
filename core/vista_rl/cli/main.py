"""Entry point of the ``vista`` command.  The group itself is nearly empty: every command, the
built-in ones included, is added through the ``register_commands`` hook."""

from __future__ import annotations

import sys
import traceback
from typing import Any

import click

from vista_rl._commands import CommandGuard, CommandPath, Owner
from vista_rl._plugins import PluginInfo, core_version, host
from vista_rl.errors import PluginLoadError, VistaError


def _print_versions(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"vista-rl {core_version()}")
    for info in host().plugins():
        if not info.builtin:
            status = " (failed to load)" if info.errors else ""
            click.echo(f"  {info.distribution} {info.version}{status}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_versions,
              help="Show the versions of core and every plugin, then exit.")
@click.option("--debug", is_flag=True, expose_value=False,
              help="Print tracebacks of errors, plugin errors included (else one line each).")
def cli() -> None:
    """VISTA: train and evaluate vision-language agents with multi-turn, tool-integrated RL."""


#: Owners of the commands of ``cli`` across every build (the group is process-wide too).
_guard = CommandGuard(cli)


def build_cli() -> click.Group:
    """Add every plugin's commands to ``cli``.  A command that a second distribution adds under a name
    already taken is undone and reported naming both (first-party first, else first registered);
    ``VISTA_STRICT_PLUGINS=1`` makes that an error."""
    plugin_host = host()
    plugin_host.load()
    snapshots: dict[str, dict[CommandPath, click.Command]] = {}

    def arguments(info: PluginInfo) -> dict[str, Any]:
        snapshots[info.key] = _guard.before()
        return {"cli": cli}

    def settle(info: PluginInfo) -> None:
        owner = Owner(info.describe(), info.distribution, info.key, info.first_party)
        _guard.after(snapshots.pop(info.key, {}), owner,
                     lambda clash: plugin_host.report_error(clash.refused.key, clash.message()))

    plugin_host.call_each("register_commands", arguments, after=settle)
    return cli


def _wants_debug(argv: list[str]) -> bool:
    """``--debug`` among the group's own options (before the subcommand), read before plugins load
    so that errors while loading them honour it too."""
    for arg in argv:
        if arg == "--debug":
            return True
        if not arg.startswith("-"):
            return False
    return False


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _wants_debug(args)
    host().debug = debug
    try:
        group = build_cli()
        group.main(args=args, prog_name="vista", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except VistaError as exc:
        if debug:
            traceback.print_exc()
        hint = " (run `vista --debug ...` for the traceback)" if isinstance(exc, PluginLoadError) and not debug else ""
        click.secho(f"Error: {exc}{hint}", fg="red", err=True)
        sys.exit(2)

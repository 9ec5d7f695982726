"""Entry point of the ``vista`` command.  The group itself is nearly empty: every command, the
built-in ones included, is added through the ``register_commands`` hook."""

from __future__ import annotations

import sys

import click

from vista_rl.errors import VistaError
from vista_rl.plugins import core_version, host


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
def cli() -> None:
    """VISTA: train and evaluate vision-language agents with multi-turn, tool-integrated RL."""


def build_cli() -> click.Group:
    host().load()
    host().call_each("register_commands", lambda _info: {"cli": cli})
    return cli


def main(argv: list[str] | None = None) -> None:
    group = build_cli()
    try:
        group.main(args=argv, prog_name="vista", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except VistaError as exc:
        click.secho(f"Error: {exc}", fg="red", err=True)
        sys.exit(2)

"""Built-in CLI commands, added through ``register_commands`` like any plugin's."""

from __future__ import annotations

import click

from vista_rl.hookspecs import hookimpl


@hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_rl.cli.audit import audit_group
    from vista_rl.cli.compare import compare_command
    from vista_rl.cli.eval import eval_command
    from vista_rl.cli.listing import all_listing_commands
    from vista_rl.cli.train import train_command
    from vista_rl.cli.trajectories import trajectories_group

    for command in all_listing_commands():
        cli.add_command(command)
    cli.add_command(eval_command)
    cli.add_command(train_command)
    cli.add_command(trajectories_group)
    cli.add_command(compare_command)
    cli.add_command(audit_group)

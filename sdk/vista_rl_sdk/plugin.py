"""vista-rl-sdk's own VISTA plugin (entry point ``sdk``): adds ``vista new`` and ``vista check-env`` to
the command line.

Kept import-light: click and the scaffold module load only when the CLI is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import vista_rl

if TYPE_CHECKING:
    import click


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_rl_sdk.check_command import check_env_command
    from vista_rl_sdk.new_command import new_command

    cli.add_command(new_command)
    cli.add_command(check_env_command)

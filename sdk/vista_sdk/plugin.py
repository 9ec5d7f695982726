"""vista-sdk's own VISTA plugin (entry point ``sdk``): adds ``vista new`` to the command line.

Kept import-light: click and the scaffold module load only when the CLI is built.
"""

from __future__ import annotations

from typing import Any

import vista


@vista.hookimpl
def register_commands(cli: Any) -> None:
    from vista_sdk.scaffold import new_command

    cli.add_command(new_command)

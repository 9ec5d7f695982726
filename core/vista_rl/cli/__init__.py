"""The ``vista`` command line.

Public: :func:`main` (what the ``vista`` script runs; ``python -c "from vista_rl.cli import main;
main()"`` is the same command) and :func:`build_cli` (the click group with every plugin's commands
added).  The modules of this package are internal.
"""

from vista_rl.cli.main import build_cli, main

__all__ = ["build_cli", "main"]

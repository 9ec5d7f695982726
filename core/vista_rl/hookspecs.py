"""Hook specifications: the whole extension surface of VISTA.

Every hook follows the ``register_*(register)`` callback style (as in ``llm``): the core passes a
``register`` function and the plugin calls it once per item.  This keeps plugin code declarative,
lets the core attribute every item to the distribution that contributed it, and allows new keyword
arguments to be added to ``register`` without breaking existing plugins.
"""

from __future__ import annotations

from typing import Any

import pluggy

#: pluggy project name; hook implementations must be marked with this project's ``hookimpl``.
PROJECT_NAME = "vista_rl"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_envs(register: Any) -> None:
    """Register environments: ``register(id, target, **metadata)``."""


@hookspec
def register_tools(register: Any) -> None:
    """Register tools the model can call: ``register(id, target, **metadata)``."""


@hookspec
def register_judges(register: Any) -> None:
    """Register reward judges: ``register(id, target, **metadata)``."""


@hookspec
def register_advantage_estimators(register: Any) -> None:
    """Register advantage estimators: ``register(id, target, **metadata)``."""


@hookspec
def register_datasets(register: Any) -> None:
    """Register task-record datasets: ``register(id, target, **metadata)``."""


@hookspec
def register_models(register: Any) -> None:
    """Register VLM backends (policies): ``register(id, target, **metadata)``."""


@hookspec
def register_engines(register: Any) -> None:
    """Register training engines: ``register(id, target, **metadata)``."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add subcommands to the ``vista`` click group ``cli``."""

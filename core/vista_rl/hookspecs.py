"""Hook specifications: the whole extension surface of VISTA.

Every hook follows the ``register_*(register)`` callback style (as in ``llm``): the core passes a
``register`` function and the plugin calls it once per item.  This keeps plugin code declarative,
lets the core attribute every item to the distribution that contributed it, and allows new keyword
arguments to be added to ``register`` without breaking existing plugins.

Each hook's ``register`` is typed by a :class:`Register` protocol for its kind (``RegisterEnv``,
``RegisterTool``, ...), so a type checker catches a plugin that registers, say, a judge as an env.
A target is either the object itself or a lazy ``"package.module:Object"`` string (imported only
when the item is made).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pluggy

from vista_rl.engine_contract import EngineFactory
from vista_rl.env import Env
from vista_rl.estimator import AdvantageOutput
from vista_rl.judge import Judge
from vista_rl.logger import MetricsLogger
from vista_rl.model import ModelBackend
from vista_rl.model_family import ModelFamily
from vista_rl.task import TaskRecord
from vista_rl.tool import Tool

if TYPE_CHECKING:
    import click

#: pluggy project name; hook implementations must be marked with this project's ``hookimpl``.
PROJECT_NAME = "vista_rl"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

_Made = TypeVar("_Made", contravariant=True)


class Register(Protocol[_Made]):
    """The ``register`` callable a ``register_*`` hook receives.

    ``register(item_id, target, description=..., **metadata)``: ``item_id`` is the id users name
    (``namespace/name-vN`` where versions matter); ``target`` is what the registry makes items from,
    or its ``"package.module:Object"`` path; ``description`` is the one line ``vista <kind>`` shows
    (default: the target's docstring); other keywords are kept as item metadata (for instance
    ``route_argument`` for ``"prefix/*"`` ids).  Never raises for a duplicate id: that is recorded
    against the plugin and shown by ``vista plugins``.
    """

    def __call__(self, item_id: str, target: _Made | str, /, **metadata: Any) -> None: ...


#: ``register`` of :func:`register_envs`: a class or factory returning an :class:`~vista_rl.Env`.
RegisterEnv = Register[Callable[..., Env]]
#: ``register`` of :func:`register_tools`: a class or factory returning a :class:`~vista_rl.Tool`.
RegisterTool = Register[Callable[..., Tool]]
#: ``register`` of :func:`register_judges`: a class or factory returning a :class:`~vista_rl.Judge`.
RegisterJudge = Register[Callable[..., Judge]]
#: ``register`` of :func:`register_advantage_estimators`: the estimator function itself
#: (``estimator(batch, **params) -> AdvantageOutput``, see :class:`vista_rl.AdvantageEstimator`).
RegisterEstimator = Register[Callable[..., AdvantageOutput]]
#: ``register`` of :func:`register_datasets`: a loader returning a sequence of task records.
RegisterDataset = Register[Callable[..., Sequence[TaskRecord]]]
#: ``register`` of :func:`register_models`: a class or factory returning a :class:`~vista_rl.ModelBackend`.
RegisterModel = Register[Callable[..., ModelBackend]]
#: ``register`` of :func:`register_engines`: a factory ``(run=RunConfig, resume=...)`` returning a
#: :class:`~vista_rl.Engine` (see :class:`~vista_rl.engine_contract.EngineFactory`).
RegisterEngine = Register[EngineFactory]
#: ``register`` of :func:`register_model_families`: a class or factory returning a
#: :class:`~vista_rl.ModelFamily` (what the local engine must know about one VLM family).
RegisterModelFamily = Register[Callable[..., ModelFamily]]
#: ``register`` of :func:`register_loggers`: a class or factory returning a :class:`~vista_rl.MetricsLogger`
#: (called with the options of the ``trainer.loggers`` entry).
RegisterLogger = Register[Callable[..., MetricsLogger]]


@hookspec
def register_envs(register: RegisterEnv) -> None:
    """Register environments: ``register(id, target, **metadata)``."""


@hookspec
def register_tools(register: RegisterTool) -> None:
    """Register tools the model can call: ``register(id, target, **metadata)``."""


@hookspec
def register_judges(register: RegisterJudge) -> None:
    """Register reward judges: ``register(id, target, **metadata)``."""


@hookspec
def register_advantage_estimators(register: RegisterEstimator) -> None:
    """Register advantage estimators: ``register(id, target, **metadata)``."""


@hookspec
def register_datasets(register: RegisterDataset) -> None:
    """Register task-record datasets: ``register(id, target, **metadata)``."""


@hookspec
def register_models(register: RegisterModel) -> None:
    """Register VLM backends (policies): ``register(id, target, **metadata)``."""


@hookspec
def register_engines(register: RegisterEngine) -> None:
    """Register training engines: ``register(id, target, **metadata)``."""


@hookspec
def register_model_families(register: RegisterModelFamily) -> None:
    """Register VLM families for the local engine (chat layout, image tokens, vision tensors):
    ``register(id, target, **metadata)``."""


@hookspec
def register_loggers(register: RegisterLogger) -> None:
    """Register experiment trackers that runs name in ``trainer.loggers``: ``register(id, target, **metadata)``."""


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``vista`` click group ``cli``."""

"""Building an engine from a run config through the plugin host, and the config checks every engine's
``validate()`` shares.  Apart from ``vista_rl.engine_contract`` (pure types and the run status) so that
the hook specs can name the contract without importing the plugin host."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from vista_rl._plugins import host
from vista_rl.engine_contract import Engine
from vista_rl.errors import ConfigError, PluginLoadError, UnknownItemError
from vista_rl.import_targets import check_import_targets

if TYPE_CHECKING:
    from vista_rl.config import AlgorithmSection, RunConfig


NEUTRAL_SECTIONS = frozenset({"algorithm", "trainer", "sft", "eval", "lora"})
#: Our engines, each its own distribution (the core needs no torch): named when one is missing.
ENGINE_DISTRIBUTIONS = {"local": "vista-plugin-local", "verl": "vista-plugin-verl"}


def build_engine(run: RunConfig, resume: str | Path | None = None) -> Engine:
    """Make ``run.engine`` from ``run``.  Unknown engine ids (also as ``engine_config`` section names)
    are config errors; a factory that does not follow the contract is a plugin error naming the engine.
    A section for one of our engines that is not installed here (``engine_config.local`` on a verl
    cluster) is kept, not refused: one run config serves every engine, each on its own machine."""

    registry = host().registry("engines")
    known = registry.ids()
    if run.engine not in known:
        where = ENGINE_DISTRIBUTIONS.get(run.engine)
        hint = f"; it comes with the plugin {where}: pip install {where}" if where else ""
        raise ConfigError(f"engine: no engine {run.engine!r} is registered (registered: {', '.join(known) or 'none'}; "
                          f"see `vista engines`){hint}")
    strangers = sorted(set(run.engine_config) - set(known) - set(ENGINE_DISTRIBUTIONS))
    if strangers:
        hint = ""
        if strangers[0] in NEUTRAL_SECTIONS:
            hint = (f"; {strangers[0]} is engine-neutral now: move it to the top level of the run config "
                    "(device, precision, LoRA and value_coef go to engine_config.local)")
        raise ConfigError(f"engine_config.{strangers[0]}: no engine {strangers[0]!r} is registered "
                          f"(engine_config holds one section per engine id: {', '.join(known)}){hint}")
    # Code the config names is announced (or, with VISTA_STRICT_PLUGINS=1, refused) before the
    # engine makes anything from the config (vista_rl.import_targets).
    check_import_targets(run)
    factory = host().spec("engines", run.engine).load()
    arguments = {"run": run, "resume": Path(resume) if resume is not None else None}
    try:
        inspect.signature(factory).bind(**arguments)
    except TypeError as exc:
        raise PluginLoadError(f"engine {run.engine!r} cannot be built as factory(run=..., resume=...) "
                              f"as the Engine contract says: {exc}") from None
    except ValueError:  # pragma: no cover - builtins without a signature: let the call decide
        pass
    engine = factory(**arguments)
    if not isinstance(engine, Engine):
        missing = [name for name in ("validate", "run") if not callable(getattr(engine, name, None))]
        raise PluginLoadError(f"engine {run.engine!r} does not follow the Engine contract "
                              f"(vista_rl.Engine): it has no {' or '.join(m + '()' for m in missing)}")
    return engine


def check_estimator_config(algorithm: AlgorithmSection) -> None:
    """``algorithm.estimator`` is registered and takes every key of ``algorithm.estimator_params``:
    the check every engine's ``validate()`` makes (verl's bridge would drop an unknown one silently)."""

    try:
        function = host().spec("estimators", algorithm.estimator).load()
    except UnknownItemError as exc:
        raise ConfigError(f"algorithm.estimator: {exc}") from None
    try:
        accepted = inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature: nothing to check
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return
    names = [name for name, p in accepted.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY]
    for key in algorithm.estimator_params:
        if key not in names:
            raise ConfigError(f"algorithm.estimator_params.{key}: {algorithm.estimator} takes no parameter "
                              f"{key!r} (it takes: {', '.join(names) or 'none'})")

"""The engine contract: what ``vista train`` needs from a training engine, and how it runs one.

An engine is registered with ``register_engines`` and built as ``factory(run=RunConfig, resume=Path |
None)``.  It then answers two calls:

- ``validate()`` checks everything that can be checked without training (its own section of the run
  config, the env id, the estimator, what it would launch) and raises :class:`ConfigError` naming
  the bad key.  It writes nothing, so ``vista train --dry-run`` is free of side effects.  It returns an
  :class:`EnginePlan`: what would run, and warnings for checks it could not make here.
- ``run()`` trains and returns a summary dict (``run_dir``, ``env``, ``evals``, ... as it has them).

:func:`run_engine` runs an engine with a status record in the run directory (``status.json``), so a
run that failed is marked so, with its error, instead of looking like a half-finished one.
"""

from __future__ import annotations

import inspect
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from vista_rl.errors import ConfigError, PluginLoadError

if TYPE_CHECKING:
    from vista_rl.config import AlgorithmSection, RunConfig

#: The status record ``vista train`` keeps in every run directory it trains into.
STATUS_FILE = "status.json"
RunState = Literal["running", "completed", "failed", "interrupted"]
#: Sections that lived under ``engine_config`` before it became one section per engine.
_NEUTRAL_SECTIONS = frozenset({"algorithm", "trainer", "sft", "eval", "lora"})


@dataclass(frozen=True)
class EnginePlan:
    """What an engine would do with a run config, from :meth:`Engine.validate`."""

    engine: str
    details: str = ""
    """Anything worth showing before a run: the command it would launch, the composed config."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """Checks that could not run here, or settings this engine does not use."""


@runtime_checkable
class Engine(Protocol):
    """A training engine built from a run config (``factory(run=..., resume=...)``)."""

    def validate(self) -> EnginePlan:
        """Check the run config for this engine without side effects; raise ConfigError naming the key."""
        ...

    def run(self) -> dict[str, Any]:
        """Train; returns the run's summary."""
        ...


class EngineFactory(Protocol):
    """What ``register_engines`` registers: a class or function that builds an :class:`Engine`."""

    def __call__(self, *, run: RunConfig, resume: Path | None = None) -> Engine: ...


def build_engine(run: RunConfig, resume: str | Path | None = None) -> Engine:
    """Make ``run.engine`` from ``run``.  Unknown engine ids (also as ``engine_config`` section names)
    are config errors; a factory that does not follow the contract is a plugin error naming the engine."""
    from vista_rl.plugins import host

    registry = host().registry("engines")
    known = registry.ids()
    if run.engine not in known:
        raise ConfigError(f"engine: no engine {run.engine!r} is registered (registered: {', '.join(known) or 'none'}; "
                          "see `vista engines`)")
    strangers = sorted(set(run.engine_config) - set(known))
    if strangers:
        hint = ""
        if strangers[0] in _NEUTRAL_SECTIONS:
            hint = (f"; {strangers[0]} is engine-neutral now: move it to the top level of the run config "
                    "(device, precision, LoRA and value_coef go to engine_config.local)")
        raise ConfigError(f"engine_config.{strangers[0]}: no engine {strangers[0]!r} is registered "
                          f"(engine_config holds one section per engine id: {', '.join(known)}){hint}")
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


def check_estimator(algorithm: AlgorithmSection) -> None:
    """``algorithm.estimator`` is registered and takes every key of ``algorithm.estimator_params``:
    the check every engine's ``validate()`` makes (verl's bridge would drop an unknown one silently)."""
    from vista_rl.errors import UnknownItemError
    from vista_rl.plugins import host

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


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """The run directory's status record, or None when it has none."""
    path = Path(run_dir) / STATUS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except FileNotFoundError:
        return None


def write_status(run_dir: str | Path, state: RunState, **fields: Any) -> None:
    """Write the status record atomically (a reader never sees half a file)."""
    path = Path(run_dir) / STATUS_FILE
    record = {"status": state, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(), **fields}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)


def run_engine(engine: Engine, run_dir: str | Path) -> dict[str, Any]:
    """Validate and run ``engine``, keeping ``run_dir/status.json`` true to how the run ended.

    ``running`` (with the pid) once validation passed, then ``completed``, ``failed`` (with the error
    and its traceback) or ``interrupted`` (Ctrl-C).  A failed run keeps its files: the config, metrics
    and checkpoints are what one needs to see why, and to ``vista train --resume`` it.  A config that
    does not validate writes nothing (engines refuse a directory that holds another run in
    ``validate()``, so its record is never overwritten).
    """
    engine.validate()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_status(run_dir, "running")
    try:
        summary = engine.run()
    except KeyboardInterrupt:
        write_status(run_dir, "interrupted", resume=f"vista train --resume {run_dir}")
        raise
    except BaseException as exc:
        write_status(run_dir, "failed", error=f"{type(exc).__name__}: {exc}",
                     traceback="".join(traceback.format_exception(exc)))
        raise
    write_status(run_dir, "completed")
    return summary

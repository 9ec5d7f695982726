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

import json
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from vista_rl._liveness import liveness, process_identity

if TYPE_CHECKING:
    from vista_rl.config import RunConfig

#: The status record ``vista train`` keeps in every run directory it trains into.
STATUS_FILE = "status.json"
RunState = Literal["running", "completed", "failed", "interrupted"]
#: Sections that lived under ``engine_config`` before it became one section per engine.


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


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """The run directory's status record, or None when it has none.

    A record that says ``running`` while the process it names is gone (killed with SIGKILL, the
    machine rebooted, the pid since reused by another process) is reported as ``interrupted``, with
    ``stale: true`` and the reason: a killed run cannot update its own file.  An unreadable record
    reads as ``{"status": "unknown", "error": ...}``: a reader must never crash on it."""
    path = Path(run_dir) / STATUS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        return {"status": "unknown", "error": f"{STATUS_FILE} is unreadable: {type(exc).__name__}: {exc}"}
    if not isinstance(record, dict):
        return {"status": "unknown", "error": f"{STATUS_FILE} does not hold a JSON object"}
    if record.get("status") == "running" and liveness(record) == "dead":
        record = {**record, "status": "interrupted", "stale": True,
                  "reason": f"status.json said running, but its process (pid {record.get('pid')}) is gone: "
                            "the run was killed (e.g. SIGKILL or out of memory)",
                  "resume": f"vista train --resume {run_dir}"}
    return record


def write_status(run_dir: str | Path, state: RunState, **fields: Any) -> None:
    """Write the status record atomically (a reader never sees half a file).  The writer's pid,
    hostname, boot id and process start time let readers tell a live run from a killed one."""
    path = Path(run_dir) / STATUS_FILE
    record = {"status": state, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **process_identity(), **fields}
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

"""Training and evaluation from Python: :func:`train` and :func:`evaluate`.

``vista train`` and ``vista eval`` call these, so a script gets exactly what the commands do (the
same config loading and overrides, the env's turn limit when the config sets none, run directories,
``status.json``, checks before anything runs) and a typed result instead of a printed table::

    import vista_rl

    result = vista_rl.evaluate(env="sokoban/sokoban-v0", model="scripted:oracle",
                               overrides=["rollout.episodes=20"])
    result.success_rate, result.run_dir

    run = vista_rl.train("examples/frozenlake_grpo.yaml", overrides=["model.path=runs/tiny"])
    run.model_path, run.evals["rl"]["success"]

A config is a :class:`~vista_rl.config.RunConfig`, a YAML path or a dict of the YAML's shape;
``overrides`` are ``key=value`` strings as ``--set`` takes them.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

import vista_rl
from vista_rl import eval_run
from vista_rl._liveness import liveness
from vista_rl.config import RunConfig, apply_overrides, load_config, validate_config
from vista_rl.engine_contract import Engine, read_status, run_engine
from vista_rl.errors import ConfigError, VistaError
from vista_rl.import_targets import check_import_targets, strict_import_targets
from vista_rl.model import ModelBackend
from vista_rl.run_results import ConfigLike, EvalResult, RunResult
from vista_rl.turn_limit import with_env_turn_limit

__all__ = ["ConfigLike", "EvalResult", "RunResult", "TrainingPlan", "evaluate", "prepare_training", "run_config",
           "run_training", "train"]

_log = logging.getLogger(__name__)
#: The per-step log the local engine (and the ``jsonl`` logger) writes in a training run directory.
STEP_LOG = "metrics.jsonl"


def run_config(config: ConfigLike, overrides: Iterable[str] = ()) -> RunConfig:
    """``config`` as a validated :class:`RunConfig` with ``overrides`` applied.

    Keys the config does not set stay unset (a RunConfig is re-read from the keys it was given), so
    defaults that depend on the env, such as ``rollout.max_turns``, still follow the env."""
    overrides = list(overrides)
    if isinstance(config, RunConfig):
        if not overrides:
            return config
        data = apply_overrides(config.model_dump(mode="json", exclude_unset=True), overrides)
        return validate_config(RunConfig, data, "config")
    if isinstance(config, (str, Path)):
        return load_config(RunConfig, config, overrides)
    if isinstance(config, Mapping):
        return load_config(RunConfig, None, overrides, base=dict(config))
    raise ConfigError(f"a run config is a RunConfig, a YAML path or a dict, not {type(config).__name__}")


# -------------------------------------------------------------------------------------- evaluate
def _spec_overrides(env: str | None, model: str | None) -> list[str]:
    overrides = []
    if env is not None:
        overrides.append(f"env.id={json.dumps(env)}")
    if model is not None:
        backend, _, path = model.partition(":")
        if not backend:
            raise ConfigError(f"model {model!r} must look like BACKEND:PATH_OR_URL (e.g. scripted:oracle)")
        overrides += [f"model.backend={json.dumps(backend)}", f"model.path={json.dumps(path or None)}"]
    return overrides


def evaluate(config: ConfigLike | None = None, *, env: str | None = None, model: str | None = None,
             overrides: Iterable[str] = (), backend: ModelBackend | None = None, html: bool = True,
             resume: bool = False, overwrite: bool = False, console: Console | None = None,
             strict: bool | None = None) -> EvalResult:
    """Evaluate a policy on an env, as ``vista eval`` does: every episode saved with its viewer, and
    the metrics with 95% CIs.

    ``env`` (a registered id) and ``model`` (``BACKEND:PATH_OR_URL``, e.g. ``scripted:oracle``,
    ``scripted:random``, ``transformers:runs/tiny``) fill the config's ``env.id`` and ``model``;
    ``overrides`` come last.  ``backend`` evaluates an already-built backend instead of making the
    config's (the caller keeps and closes it).  Without ``rollout.max_turns`` the episodes play the
    env's own turn limit.  Without ``output_dir`` the run goes to ``runs/eval-ENV-TIME``.  Raises
    :class:`vista_rl.eval_run.RunSetupError` when the run cannot start (another run in the output
    directory, an env or backend that cannot be made).  Code the config names (``ImportTarget`` fields)
    is announced, or with ``strict`` (default: ``VISTA_STRICT_PLUGINS``) refused, before anything is
    made (:mod:`vista_rl.import_targets`)."""
    run = run_config(config if config is not None else {}, [*_spec_overrides(env, model), *overrides])
    with _strictness(strict):
        check_import_targets(run)
    run = eval_run.default_output_dir(run)
    out = Path(run.output_dir)
    eval_run.check_output_dir(out, resume=resume, overwrite=overwrite)
    made = eval_run.make_checked_env(run)
    try:
        run = with_env_turn_limit(run, made)
        if backend is None:
            eval_run.check_policy_fits_env(run, made)
    finally:
        made.close()
    own_backend = None
    if backend is None and run.rollout.model_workers > 1:  # each worker builds its own backend
        eval_run.check_worker_model_path(run)
    elif backend is None:
        backend = own_backend = eval_run.build_backend(run)
    try:
        summary = eval_run.run_eval(run, backend, console or Console(), html=html, resume=resume)
    finally:
        if own_backend is not None:
            own_backend.close()
    return EvalResult(out, summary, run)


# ----------------------------------------------------------------------------------------- train
@dataclass(frozen=True)
class TrainingPlan:
    """A built, not yet validated, training run: what ``vista train --dry-run`` shows and
    :func:`train` runs.  ``notes`` are things to tell the user (a stale run being resumed)."""

    run: RunConfig
    engine: Engine
    run_dir: Path
    notes: tuple[str, ...] = field(default_factory=tuple)


def prepare_training(config: ConfigLike | None = None, *, engine: str | None = None, overrides: Iterable[str] = (),
                     resume: str | Path | None = None, strict: bool | None = None) -> TrainingPlan:
    """Build the engine for a run: the config with ``overrides`` (``engine`` overrides its
    ``engine``), or with ``resume`` the run directory's saved config, and the env's turn limit when
    the config sets no ``rollout.max_turns``.  Refuses to resume a run a live process still trains.
    Code the config names is checked (:mod:`vista_rl.import_targets`; ``strict`` refuses it) before
    the env is made for its turn limit, and again by the engine build."""
    overrides = [*overrides, *([f"engine={engine}"] if engine is not None else [])]
    notes: tuple[str, ...] = ()
    if resume is not None:
        run_dir = Path(resume)
        notes = _check_not_running(run_dir)
        run = _resume_config(run_dir, overrides)
    elif config is None:
        raise ConfigError("give a run config to start a run, or resume=RUN_DIR to continue one")
    else:
        run = run_config(config, overrides)
        run_dir = Path(run.output_dir)
    with _strictness(strict):
        check_import_targets(run)  # before with_env_turn_limit makes an env from the config
        run = with_env_turn_limit(run)
        built = vista_rl.make_engine(run.engine, run=run, resume=resume)
    return TrainingPlan(run, built, run_dir, notes)


@contextlib.contextmanager
def _strictness(strict: bool | None) -> Iterator[None]:
    """``strict`` for the import-target checks inside the block; ``None`` leaves the default."""
    if strict is None:
        yield
    else:
        with strict_import_targets(strict):
            yield


def train(config: ConfigLike | None = None, *, engine: str | None = None, overrides: Iterable[str] = (),
          resume: str | Path | None = None, strict: bool | None = None) -> RunResult:
    """Train as ``vista train`` does and return where the run is and what it measured.

    ``engine`` picks the training engine (default: the config's ``engine``, which defaults to
    ``local``); ``resume`` continues the run in that directory from its last checkpoint (then
    ``config`` is not needed).  The run directory gets its ``status.json`` (running, then completed
    or failed with the error); errors propagate.  ``strict`` refuses a config that names code outside
    the installed VISTA plugins (default: ``VISTA_STRICT_PLUGINS``; see :mod:`vista_rl.import_targets`)."""
    plan = prepare_training(config, engine=engine, overrides=overrides, resume=resume, strict=strict)
    for note in plan.notes:
        _log.warning(note)
    return run_training(plan)


def run_training(plan: TrainingPlan) -> RunResult:
    """Validate and run a prepared plan with its ``status.json`` (:func:`vista_rl.engine_contract.run_engine`)."""
    summary = run_engine(plan.engine, plan.run_dir)
    return RunResult(plan.run_dir, summary, _last_step(plan.run_dir), _model_path(plan.run_dir, summary), plan.run)


def _resume_config(run_dir: Path, overrides: Iterable[str]) -> RunConfig:
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        raise ConfigError(f"--resume {run_dir}: no config.yaml there (is it a run directory made by vista train?)")
    data = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
    data["output_dir"] = str(run_dir)
    return validate_config(RunConfig, data, str(saved))


def _check_not_running(run_dir: Path) -> tuple[str, ...]:
    """Refuse to resume a run that a live process is still training; say so when the status file's
    "running" is stale (its process was killed), since that is the run resuming is for."""
    status = read_status(run_dir)
    if not status:
        return ()
    if status.get("stale"):
        return (f"vista train: {run_dir} was interrupted ({status.get('reason')}); resuming it",)
    if status.get("status") == "running":
        if liveness(status) == "alive":
            raise VistaError(
                f"{run_dir} is still being trained by process {status.get('pid')} on this machine; stop it "
                "first (two trainers would write the same checkpoints)")
        return (f"vista train: {run_dir / 'status.json'} says running on {status.get('hostname', 'another host')}, "
                "which this machine cannot check; resuming it",)
    return ()


def _last_step(run_dir: Path) -> dict[str, Any]:
    """The last JSON object of the run's per-step log (a torn last line is skipped)."""
    path = run_dir / STEP_LOG
    if not path.is_file():
        return {}
    for line in reversed(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return {}


def _model_path(run_dir: Path, summary: Mapping[str, Any]) -> Path | None:
    named = summary.get("model_path")
    if isinstance(named, (str, Path)):
        return Path(named)
    final = run_dir / "models" / "final"
    return final if (final / "config.json").is_file() else None

"""One evaluation run: the checks before it, its backend, its episodes and its summary.

``vista eval`` and :func:`vista_rl.evaluate` share this module (the CLI only turns flags into config
overrides and prints).  Problems found before any episode runs (an ``--out`` that holds another run,
an env that cannot be made, a backend that cannot start) are :class:`RunSetupError`, which the CLI
shows as a one-line error.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import vista_rl
from vista_rl.config import RunConfig
from vista_rl.env import Env, declared_actions
from vista_rl.errors import VistaError
from vista_rl.model import ModelBackend
from vista_rl.model_paths import ModelPathError, check_model_path
from vista_rl.rollout import EpisodeStats, RolloutEngine, RolloutMetrics, episode_specs, make_pool
from vista_rl.store import RunWriter
from vista_rl.store.layout import (
    CONFIG_FILE,
    HTML_FILE,
    IMAGES_DIR,
    SUMMARY_METRICS_FILE,
    TRAJECTORIES_FILE,
    VERSIONS_FILE,
)
from vista_rl.trajectory import Trajectory


class RunSetupError(VistaError):
    """An eval cannot start: its run directory, env or model backend; the message says what to do."""


#: What ``vista eval`` writes into its run directory; anything else there belongs to something else.
EVAL_FILES = frozenset({TRAJECTORIES_FILE, IMAGES_DIR, CONFIG_FILE, VERSIONS_FILE, SUMMARY_METRICS_FILE, HTML_FILE})
#: Files that mark a training run directory (``vista train``'s status record, checkpoints, step log).
_TRAIN_MARKERS = ("status.json", "checkpoints", "metrics.jsonl")


def default_output_dir(config: RunConfig) -> RunConfig:
    """``config`` with ``output_dir`` set to ``runs/eval-ENV-TIME`` when it sets none itself."""
    if "output_dir" in config.model_fields_set:
        return config
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", config.env.id).strip("-")
    return config.model_copy(update={"output_dir": str(Path("runs") / f"eval-{slug}-{time.strftime('%Y%m%d-%H%M%S')}")})


def build_backend(config: RunConfig) -> ModelBackend:
    """Make the backend, turning any failure (missing model directory, bad URL) into one message."""
    kwargs = dict(config.model.config)
    if config.model.path is not None:
        kwargs["path"] = config.model.path
    where = f"{config.model.backend}:{config.model.path}" if config.model.path else config.model.backend
    try:
        check_model_path(config.model.path)  # a path-like typo fails here, not after minutes of hub retries
    except ModelPathError as exc:
        raise RunSetupError(f"could not start model backend {where}: {exc}") from None
    try:
        return vista_rl.make_model(config.model.backend, **kwargs)
    except VistaError:
        raise
    except Exception as exc:  # noqa: BLE001 - any backend start-up failure becomes a clear message
        raise RunSetupError(f"could not start model backend {where}: {type(exc).__name__}: {exc}") from None


def check_worker_model_path(config: RunConfig) -> None:
    """With model workers each worker builds its own backend; a missing path fails here, once."""
    try:
        check_model_path(config.model.path)
    except ModelPathError as exc:
        raise RunSetupError(f"could not start model backend {config.model.backend}: {exc}") from None


def make_checked_env(config: RunConfig) -> Env:
    """Make one env of the run up front, so a typo in its id or config fails before the run (the
    caller closes it)."""
    try:
        return vista_rl.make_env(config.env.id, **config.env.config)
    except VistaError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunSetupError(f"could not create env {config.env.id}: {type(exc).__name__}: {exc}") from None


def check_env(config: RunConfig) -> None:
    """Make and close one env up front, so a typo in its id or config fails before the run."""
    make_checked_env(config).close()


def check_policy_fits_env(config: RunConfig, env: Env) -> None:
    """``scripted:random`` chooses among the env's declared actions: refuse an env with none now,
    rather than fail every episode."""
    if (config.model.backend, config.model.path) == ("scripted", "random") and not declared_actions(env):
        raise RunSetupError(f"scripted:random picks among the env's declared actions, and {config.env.id} "
                            "declares none (no action_names); it suits games, not question answering")


def check_output_dir(out: Path, *, resume: bool = False, overwrite: bool = False) -> None:
    """Refuse an ``--out`` that holds another run, before anything is written there.

    A user who points ``--out`` at a training run (config.yaml, checkpoints, status.json) or at any
    directory with files eval did not write has most likely mistyped: overwriting its config.yaml
    would lose the record of how those checkpoints were made.  An eval directory of our own layout
    may be re-run while it holds no episodes (a run that died at start), resumed with ``--resume``,
    or replaced with ``--overwrite``.  ``--overwrite`` removes only this eval's trajectories,
    metrics and viewer; files eval does not write are kept (their names are printed)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise RunSetupError(f"--out {out} is a file, not a directory")
    foreign = sorted(path.name for path in out.iterdir() if path.name not in EVAL_FILES
                     and not path.name.startswith("."))
    trajectories = out / TRAJECTORIES_FILE
    has_episodes = trajectories.is_file() and trajectories.stat().st_size > 0
    if foreign and not overwrite:
        training = [name for name in foreign if name in _TRAIN_MARKERS]
        what = (f"a training run ({', '.join(training)})" if training
                else f"files that vista eval does not write ({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''})")
        raise RunSetupError(
            f"{out} holds {what}; writing this eval there would overwrite its config.yaml. Choose a new --out, "
            "or pass --overwrite to write this eval's files there anyway (other files are left alone)")
    if has_episodes and not (resume or overwrite):
        raise RunSetupError(
            f"{out} already holds trajectories of an earlier run; choose a new --out, pass --resume "
            "to keep them and run only the missing episodes, or --overwrite to replace them")
    if overwrite:
        for name in (TRAJECTORIES_FILE, SUMMARY_METRICS_FILE, HTML_FILE):
            (out / name).unlink(missing_ok=True)


def _check_resumable(config: RunConfig, out: Path) -> None:
    """A resumed run must be the same eval: the same env and env config, or its seeds mean other
    episodes and the metrics would mix two experiments."""
    saved_path = out / CONFIG_FILE
    if not saved_path.exists():
        return
    try:
        saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        saved = {}
    saved_env = saved.get("env") if isinstance(saved, dict) else None
    if not isinstance(saved_env, dict):
        return
    now = config.env.model_dump(mode="json")
    for key in ("id", "config"):
        if key in saved_env and saved_env.get(key) != now.get(key):
            raise RunSetupError(
                f"cannot resume {out}: it was run with env.{key}={saved_env.get(key)!r}, this eval has "
                f"env.{key}={now.get(key)!r}; choose a new --out for a different eval")


def _episode_runner(config: RunConfig, backend: ModelBackend | None) -> Any:
    """One rollout engine on ``backend``, or with ``rollout.model_workers > 1`` a pool of model
    workers that each build their own backend (same ``stream``/``timings``/context-manager shape)."""
    if config.rollout.model_workers > 1:
        return make_pool(config)
    if backend is None:
        raise ValueError("run_eval needs a backend unless rollout.model_workers > 1")
    return RolloutEngine(backend, config.rollout, seed=config.seed)


def run_eval(config: RunConfig, backend: ModelBackend | None, console: Console, html: bool = True,
             resume: bool = False) -> dict[str, Any]:
    """Run the eval described by ``config`` and write its run directory; returns the summary.

    With ``resume`` the run directory may hold an earlier (interrupted) run of the same eval: its
    recorded episodes are kept and skipped, and the metrics cover every record in the file.  The
    summary carries the turn cap played (``max_turns``), the env's own limit (``env_turn_limit``)
    and how many episodes a limit the env did not choose cut off (``cut_off_episodes``)."""
    rollout = config.rollout
    seeds = range(config.seed, config.seed + rollout.episodes)
    specs = episode_specs(config.env.id, seeds, rollout.group_size, config.env.config)
    metrics = RolloutMetrics()
    out = Path(config.output_dir)
    if resume:
        _check_resumable(config, out)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("success {task.fields[success]}"), TimeElapsedColumn(), TimeRemainingColumn())
    env_limit: int | None = None
    with RunWriter(out, config, html=html, resume=resume) as writer, \
            _episode_runner(config, backend) as engine:
        seen_seeds: set[int | None] = set()
        unreadable = 0
        for record in writer.existing:
            try:
                trajectory = Trajectory.from_dict(record)
            except Exception:  # noqa: BLE001 - a record an older version wrote is counted, not fatal
                unreadable += 1
                continue
            metrics.add(trajectory)
            seen_seeds.add(trajectory.seed)
        todo = [spec for spec in specs if (spec.env_id, spec.seed, spec.sample_index) not in writer.recorded]
        if resume:
            cut = f", cut a partial last line of {writer.repaired_bytes} bytes" if writer.repaired_bytes else ""
            console.print(f"resuming {out}: {len(writer.existing)} episode(s) already recorded{cut}; "
                          f"running the {len(todo)} missing", soft_wrap=True)
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task(f"eval {config.env.id}", total=len(todo), success="-")
            # one process: its images go to the writer as they arrive (the workers' pool has no sink)
            finished = (engine.stream(todo, image_sink=writer.write_images) if isinstance(engine, RolloutEngine)
                        else engine.stream(todo))
            for trajectory in finished:
                writer.write(trajectory)
                metrics.add(trajectory)
                seen_seeds.add(trajectory.seed)
                env_limit = env_limit or EpisodeStats.from_metadata(trajectory.metadata).env_turn_limit
                progress.update(task, advance=1, success=f"{metrics.successes}/{metrics.episodes}")
        summary: dict[str, Any] = {
            "env": config.env.id, "model": f"{config.model.backend}:{config.model.path or ''}",
            "seeds": len(seen_seeds), "group_size": rollout.group_size,
            "max_turns": rollout.max_turns, "env_turn_limit": env_limit, **metrics.summary(),
            "timings": engine.timings.to_dict(),
        }
        if rollout.model_workers > 1:
            summary["model_workers"] = {"mode": rollout.model_worker_mode, "workers": rollout.model_workers,
                                        "episodes_per_worker": list(engine.episodes_per_worker)}
        if resume:
            summary["resumed"] = {"recorded_before": len(writer.existing), "run_now": len(todo),
                                  "repaired_bytes": writer.repaired_bytes, "unreadable_records": unreadable}
        writer.write_metrics(summary)
    return summary


def cut_off_note(summary: dict[str, Any]) -> str | None:
    """One line on the episodes a limit the env did not choose cut off, or ``None`` when none were."""
    count = int(summary.get("cut_off_episodes") or 0)
    if not count:
        return None
    by = summary.get("cut_off_by") or {}
    env_limit = summary.get("env_turn_limit")
    own = f"its own limit is {env_limit}" if env_limit else "it declares no turn limit"
    if set(by) <= {"max_turns"}:
        cause = f"rollout.max_turns={summary.get('max_turns')}, a limit the env did not choose ({own})"
        fix = "raise --max-turns (rollout.max_turns), or leave it unset to play the env's own limit"
    else:
        cause = "limits the env did not choose (" + ", ".join(f"{name}: {n}" for name, n in sorted(by.items())) + ")"
        fix = "raise rollout.max_turns / rollout.max_context_tokens"
    return (f"{count} of {summary.get('episodes')} episode(s) were cut off by {cause}; their success is the "
            f"limit's, not the policy's: {fix}")

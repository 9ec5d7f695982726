"""``vista eval``: run a policy on an env with the rollout engine, save every trajectory and report
metrics with 95% confidence intervals.

Flags and a YAML run config combine in this order: the YAML file (``vista eval run.yaml`` or
``--config``), then flags given on the command line, then ``--set key=value`` overrides.  Without a
config file every flag applies with its default (greedy decoding by default).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import click
import yaml
from click.core import ParameterSource
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
from vista_rl.cli.trajectories import metrics_table
from vista_rl.config import RunConfig, load_config
from vista_rl.errors import VistaError
from vista_rl.model import ModelBackend
from vista_rl.model_paths import ModelPathError, check_model_path
from vista_rl.rollout import RolloutEngine, RolloutMetrics, episode_specs, make_pool
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

# flag name -> dotted config key
_FLAG_KEYS = {
    "env_id": "env.id",
    "episodes": "rollout.episodes",
    "max_turns": "rollout.max_turns",
    "reflection": "rollout.reflection",
    "reflection_attempts": "rollout.reflection_attempts",
    "max_attempts": "rollout.reflection_attempts",  # the old flag name, until 0.2
    "seed": "seed",
    "out_dir": "output_dir",
    "group_size": "rollout.group_size",
    "temperature": "rollout.sampling.temperature",
    "max_tokens": "rollout.sampling.max_tokens",
    "batch_size": "rollout.batch_size",
    "window_size": "rollout.window_size",
    "model_workers": "rollout.model_workers",
    "model_worker_mode": "rollout.model_worker_mode",
}


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    """``BACKEND:PATH_OR_URL`` -> (backend, path); only the first colon splits, so URLs survive."""
    backend, _, path = spec.partition(":")
    if not backend:
        raise click.BadParameter(f"{spec!r} must look like BACKEND:PATH_OR_URL (e.g. scripted:oracle)")
    return backend, (path or None)


def _flag_overrides(ctx: click.Context, values: dict[str, Any], with_config: bool) -> list[str]:
    overrides = []
    for name, key in _FLAG_KEYS.items():
        value = values.get(name)
        explicit = ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
        if value is None or (with_config and not explicit):
            continue
        overrides.append(f"{key}={json.dumps(str(value) if isinstance(value, Path) else value)}")
    model_spec = values.get("model_spec")
    if model_spec:
        backend, path = parse_model_spec(model_spec)
        overrides.append(f"model.backend={json.dumps(backend)}")
        overrides.append(f"model.path={json.dumps(path)}")
    return overrides


def resolve_config(ctx: click.Context, config_path: Path | None, values: dict[str, Any],
                   sets: tuple[str, ...]) -> RunConfig:
    overrides = _flag_overrides(ctx, values, with_config=config_path is not None)
    if config_path is None and not values.get("env_id"):
        raise click.UsageError("give --env ID (or a run config file with an env section)")
    if config_path is None and not values.get("model_spec"):
        raise click.UsageError("give --model BACKEND:PATH_OR_URL (or a run config file with a model section)")
    config = load_config(RunConfig, config_path, overrides=[*overrides, *sets])
    if "output_dir" not in config.model_fields_set:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", config.env.id).strip("-")
        config.output_dir = str(Path("runs") / f"eval-{slug}-{time.strftime('%Y%m%d-%H%M%S')}")
    return config


def build_backend(config: RunConfig) -> ModelBackend:
    """Make the backend, turning any failure (missing model directory, bad URL) into one message."""
    kwargs = dict(config.model.config)
    if config.model.path is not None:
        kwargs["path"] = config.model.path
    where = f"{config.model.backend}:{config.model.path}" if config.model.path else config.model.backend
    try:
        check_model_path(config.model.path)  # a path-like typo fails here, not after minutes of hub retries
    except ModelPathError as exc:
        raise click.ClickException(f"could not start model backend {where}: {exc}") from None
    try:
        return vista_rl.make_model(config.model.backend, **kwargs)
    except VistaError:
        raise
    except Exception as exc:  # noqa: BLE001 - any backend start-up failure becomes a clear message
        raise click.ClickException(f"could not start model backend {where}: {type(exc).__name__}: {exc}") from None


def check_env(config: RunConfig) -> None:
    """Make and close one env up front, so a typo in its id or config fails before the run."""
    try:
        vista_rl.make_env(config.env.id, **config.env.config).close()
    except VistaError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise click.ClickException(f"could not create env {config.env.id}: {type(exc).__name__}: {exc}") from None


#: What ``vista eval`` writes into its run directory; anything else there belongs to something else.
EVAL_FILES = frozenset({TRAJECTORIES_FILE, IMAGES_DIR, CONFIG_FILE, VERSIONS_FILE, SUMMARY_METRICS_FILE, HTML_FILE})
#: Files that mark a training run directory (``vista train``'s status record, checkpoints, step log).
_TRAIN_MARKERS = ("status.json", "checkpoints", "metrics.jsonl")


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
        raise click.ClickException(f"--out {out} is a file, not a directory")
    foreign = sorted(path.name for path in out.iterdir() if path.name not in EVAL_FILES
                     and not path.name.startswith("."))
    trajectories = out / TRAJECTORIES_FILE
    has_episodes = trajectories.is_file() and trajectories.stat().st_size > 0
    if foreign and not overwrite:
        training = [name for name in foreign if name in _TRAIN_MARKERS]
        what = (f"a training run ({', '.join(training)})" if training
                else f"files that vista eval does not write ({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''})")
        raise click.ClickException(
            f"{out} holds {what}; writing this eval there would overwrite its config.yaml. Choose a new --out, "
            "or pass --overwrite to write this eval's files there anyway (other files are left alone)")
    if has_episodes and not (resume or overwrite):
        raise click.ClickException(
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
            raise click.ClickException(
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
    recorded episodes are kept and skipped, and the metrics cover every record in the file."""
    rollout = config.rollout
    seeds = range(config.seed, config.seed + rollout.episodes)
    specs = episode_specs(config.env.id, seeds, rollout.group_size, config.env.config)
    metrics = RolloutMetrics()
    out = Path(config.output_dir)
    if resume:
        _check_resumable(config, out)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("success {task.fields[success]}"), TimeElapsedColumn(), TimeRemainingColumn())
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
            for trajectory in engine.stream(todo):
                writer.write(trajectory)
                metrics.add(trajectory)
                seen_seeds.add(trajectory.seed)
                progress.update(task, advance=1, success=f"{metrics.successes}/{metrics.episodes}")
        summary: dict[str, Any] = {
            "env": config.env.id, "model": f"{config.model.backend}:{config.model.path or ''}",
            "seeds": len(seen_seeds), "group_size": rollout.group_size, **metrics.summary(),
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


@click.command("eval")
@click.argument("config_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--config", "config_option", type=click.Path(dir_okay=False, path_type=Path),
              help="Run config YAML (same as the positional CONFIG_FILE).")
@click.option("--env", "env_id", help="Registered env id, e.g. oddshape/odd-colour-v0.")
@click.option("--model", "model_spec", help="BACKEND:PATH_OR_URL, e.g. scripted:oracle or transformers:./tiny.")
@click.option("--episodes", default=20, show_default=True, type=click.IntRange(min=1), help="Seeds to run.")
@click.option("--group-size", default=1, show_default=True, type=click.IntRange(min=1), help="Samples per seed.")
@click.option("--max-turns", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--reflection/--no-reflection", default=False, show_default=True,
              help="After a wrong final answer, give feedback and retry.")
@click.option("--reflection-attempts", default=3, show_default=True, type=click.IntRange(min=1),
              help="Tries per episode with --reflection, the first included (rollout.reflection_attempts).")
@click.option("--max-attempts", default=None, type=click.IntRange(min=1), hidden=True,
              help="Old name of --reflection-attempts (goes away in 0.2).")
@click.option("--seed", default=0, show_default=True, type=int, help="First seed; sampling seed too.")
@click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(min=0.0))
@click.option("--max-tokens", default=None, type=click.IntRange(min=1), help="New tokens per turn.")
@click.option("--batch-size", default=None, type=click.IntRange(min=1), help="Episodes alive at once.")
@click.option("--window-size", default=None, type=click.IntRange(min=1), help="Keep only the last K turns.")
@click.option("--model-workers", default=None, type=click.IntRange(min=1),
              help="Model workers, each with its own backend (rollout.model_workers; default 1).")
@click.option("--model-worker-mode", default=None, type=click.Choice(["process", "ray"]),
              help="Model workers as processes or Ray actors (rollout.model_worker_mode; default process).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default runs/eval-ENV-TIME).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Config override, e.g. rollout.window_size=2.")
@click.option("--no-html", is_flag=True, help="Skip writing trajectories.html.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run in --out: keep its episodes, run only the missing ones.")
@click.option("--overwrite", is_flag=True,
              help="Write into --out even though it holds another run: this eval's files there (trajectories, "
                   "metrics, viewer, config) are replaced; files that eval does not write are left alone.")
@click.pass_context
def eval_command(ctx: click.Context, config_file: Path | None, config_option: Path | None, sets: tuple[str, ...],
                 no_html: bool, resume: bool, overwrite: bool, **values: Any) -> None:
    """Evaluate a model backend on an environment: metrics with 95% CIs and saved trajectories."""
    if config_file and config_option and config_file != config_option:
        raise click.UsageError("give the config file once (positional CONFIG_FILE or --config)")
    config_path = config_file or config_option
    attempts_given = ctx.get_parameter_source("reflection_attempts") != ParameterSource.DEFAULT
    if values.get("max_attempts") is not None:
        if attempts_given:
            raise click.UsageError("--max-attempts is the old name of --reflection-attempts; give only the new one")
        click.echo("warning: --max-attempts is deprecated and goes away in vista-rl 0.2; "
                   "use --reflection-attempts", err=True)
        values["reflection_attempts"] = None
    elif not values.get("reflection") and not attempts_given:
        values["reflection_attempts"] = None if config_path else 1
    if resume and overwrite:
        raise click.UsageError("--resume keeps the episodes in --out and --overwrite replaces them; give one")
    config = resolve_config(ctx, config_path, values, sets)
    out = Path(config.output_dir)
    check_output_dir(out, resume=resume, overwrite=overwrite)
    check_env(config)
    if config.rollout.model_workers > 1:  # each worker builds its own backend; check the path here
        try:
            check_model_path(config.model.path)
        except ModelPathError as exc:
            raise click.ClickException(f"could not start model backend {config.model.backend}: {exc}") from None
        backend = None
    else:
        backend = build_backend(config)
    console = Console()
    try:
        summary = run_eval(config, backend, console, html=not no_html, resume=resume)
    finally:
        if backend is not None:
            backend.close()
    console.print(metrics_table(summary, f"{config.env.id} · {summary['model']}"))
    if summary["failures"]:
        console.print(f"[dark_orange]{summary['failures']} episode(s) failed; e.g. "
                      f"{summary['failure_examples'][0]}[/dark_orange]", soft_wrap=True)
    if summary["tokens_estimated"]:
        console.print("[dim]tokens estimated from text length (the backend reports no token ids)[/dim]")
    console.print(f"trajectories, metrics and viewer written to {out} "
                  f"(vista trajectories show {out}; open {out / 'trajectories.html'})", soft_wrap=True)

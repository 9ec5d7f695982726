"""``vista train CONFIG.yaml [--set key=value ...] [--resume RUN_DIR]``."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table

import vista_rl
from vista_rl._liveness import liveness
from vista_rl.config import RunConfig, load_config, validate_config
from vista_rl.engine_contract import STATUS_FILE, read_status, run_engine
from vista_rl.errors import ConfigError


def _resume_config(run_dir: Path, overrides: tuple[str, ...]) -> RunConfig:
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        raise ConfigError(f"--resume {run_dir}: no config.yaml there (is it a run directory made by vista train?)")
    data = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    if overrides:
        from vista_rl.config import apply_overrides

        data = apply_overrides(data, overrides)
    data["output_dir"] = str(run_dir)
    return validate_config(RunConfig, data, str(saved))


@click.command("train")
@click.argument("config", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set trainer.steps=10 (repeatable).")
@click.option("--resume", "resume", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Continue the run in RUN_DIR from its last checkpoint (same optimizer, RNG and data position).")
@click.option("--engine", "engine_id", default=None, help="Engine to train with (overrides the config's `engine`).")
@click.option("--dry-run", is_flag=True,
              help="Validate the config for the engine (its own section included) and print what would run.")
def train_command(config: Path | None, overrides: tuple[str, ...], resume: Path | None, engine_id: str | None,
                  dry_run: bool) -> None:
    """Train a policy with the engine the run config names (default: local).

    The run directory gets a status.json: running, then completed, failed (with the error) or
    interrupted; a failed run keeps its files for inspection and `--resume`.
    """
    if config is None and resume is None:
        raise click.UsageError("give a CONFIG.yaml to start a run, or --resume RUN_DIR to continue one")
    if engine_id is not None:
        overrides = (*overrides, f"engine={engine_id}")
    if resume is not None:
        _check_not_running(resume)
        run = _resume_config(resume, overrides)
    else:
        assert config is not None
        run = load_config(RunConfig, config, overrides)
    engine = vista_rl.make_engine(run.engine, run=run, resume=resume)
    if dry_run:
        plan = engine.validate()
        click.echo(yaml.safe_dump(run.model_dump(mode="json"), sort_keys=False))
        if plan.details:
            click.echo(plan.details)
        for warning in plan.warnings:
            click.echo(f"warning: {warning}", err=True)
        click.echo(f"dry run: the config is valid for engine {run.engine!r}; nothing was trained")
        return
    run_dir = resume if resume is not None else Path(run.output_dir)
    try:
        summary = run_engine(engine, run_dir)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:
        if (run_dir / STATUS_FILE).is_file() and (read_status(run_dir) or {}).get("status") == "failed":
            click.echo(f"vista train: the run failed; {run_dir / STATUS_FILE} records the error", err=True)
        raise
    _print_summary(summary)


def _check_not_running(run_dir: Path) -> None:
    """Refuse to resume a run that a live process is still training; say so when the status file's
    "running" is stale (its process was killed), since that is the run ``--resume`` is for."""
    status = read_status(run_dir)
    if not status:
        return
    if status.get("stale"):
        click.echo(f"vista train: {run_dir} was interrupted ({status.get('reason')}); resuming it", err=True)
    elif status.get("status") == "running":
        if liveness(status) == "alive":
            raise click.ClickException(
                f"{run_dir} is still being trained by process {status.get('pid')} on this machine; stop it "
                "first (two trainers would write the same checkpoints)")
        click.echo(f"vista train: {run_dir / STATUS_FILE} says running on {status.get('hostname', 'another host')}, "
                   "which this machine cannot check; resuming it", err=True)


def _print_summary(summary: dict[str, object]) -> None:
    console = Console()
    evals = summary.get("evals")
    if isinstance(evals, dict) and evals:
        table = Table(title=f"held-out success on {summary.get('env')}")
        table.add_column("model")
        table.add_column("success [95% CI]")
        table.add_column("episodes")
        for label, record in evals.items():
            success = record["success"]
            table.add_row(label, f"{success['value']:.3f} [{success['ci95_low']:.3f}, {success['ci95_high']:.3f}]",
                          str(record["episodes"]))
        console.print(table)
    console.print(f"run directory: {summary.get('run_dir')}")

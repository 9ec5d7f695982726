"""``vista train CONFIG.yaml [--set key=value ...] [--resume RUN_DIR]``: :func:`vista_rl.train` with its
progress and summary printed."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table

from vista_rl.api import prepare_training, run_training
from vista_rl.engine_contract import STATUS_FILE, read_status
from vista_rl.import_targets import find_import_targets, import_targets_listing


@click.command("train")
@click.argument("config", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set trainer.steps=10 (repeatable).")
@click.option("--resume", "resume", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Continue the run in RUN_DIR from its last checkpoint (same optimizer, RNG and data position).")
@click.option("--engine", "engine_id", default=None, help="Engine to train with (overrides the config's `engine`).")
@click.option("--dry-run", is_flag=True,
              help="Validate the config for the engine (its own section included) and print what would run, "
                   "with every import target the config names.")
@click.option("--strict", is_flag=True,
              help="Refuse a config that names code outside the installed VISTA plugins (an ImportTarget field, "
                   "such as the svg env's encoder) before anything is imported; VISTA_STRICT_PLUGINS=1 does too.")
def train_command(config: Path | None, overrides: tuple[str, ...], resume: Path | None, engine_id: str | None,
                  dry_run: bool, strict: bool) -> None:
    """Train a policy with the engine the run config names (default: local).

    The run directory gets a status.json: running, then completed, failed (with the error) or
    interrupted; a failed run keeps its files for inspection and `--resume`.
    """
    if config is None and resume is None:
        raise click.UsageError("give a CONFIG.yaml to start a run, or --resume RUN_DIR to continue one")
    plan = prepare_training(config, engine=engine_id, overrides=overrides, resume=resume, strict=strict or None)
    for note in plan.notes:
        click.echo(note, err=True)
    run = plan.run
    if dry_run:
        checked = plan.engine.validate()
        click.echo(yaml.safe_dump(run.model_dump(mode="json"), sort_keys=False))
        click.echo(import_targets_listing(find_import_targets(run)))
        if checked.details:
            click.echo(checked.details)
        for warning in checked.warnings:
            click.echo(f"warning: {warning}", err=True)
        click.echo(f"dry run: the config is valid for engine {run.engine!r}; nothing was trained")
        return
    run_dir = plan.run_dir
    try:
        result = run_training(plan)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:
        if (run_dir / STATUS_FILE).is_file() and (read_status(run_dir) or {}).get("status") == "failed":
            click.echo(f"vista train: the run failed; {run_dir / STATUS_FILE} records the error", err=True)
        raise
    _print_summary(result.summary)


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

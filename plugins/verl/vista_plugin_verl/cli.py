"""``vista verl launch CONFIG.yaml [--dry-run] [--set k=v]``: the verl engine from the command line
(``vista train`` with ``engine: verl`` does the same; this adds ``--dry-run`` as a flag)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("verl")
def verl_group() -> None:
    """Train with verl (Ray, vLLM/SGLang, FSDP) using vista envs, estimators and judges."""


@verl_group.command("launch")
@click.argument("config", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a run-config key.")
@click.option("--dry-run", is_flag=True, help="Write datasets, compose and validate verl's config, print the "
                                              "command and config; do not launch.")
def launch_command(config: Path, overrides: tuple[str, ...], dry_run: bool) -> None:
    """Compose verl's config from CONFIG.yaml, validate it with verl's loader, run verl.trainer.main_ppo."""
    from vista.config import RunConfig, load_config
    from vista_plugin_verl.engine import VerlEngine

    run = load_config(RunConfig, config, overrides)
    summary = VerlEngine(run=run, dry_run=dry_run or None).run()
    click.echo(f"run directory: {summary['run_dir']}", err=True)

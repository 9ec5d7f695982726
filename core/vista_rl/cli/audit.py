"""``vista audit rewards ENV``: adversarial scripted policies against an env's reward.

The env and its config come as in ``vista eval``: a registered id, and ``--set`` overrides of the
run config (``env.config.records_path=...`` for a user's converted records, ``rollout.max_turns=8``,
``rollout.reflection=true``), or a run config file with ``--config``.  It prints one table per path
(``env.step`` and the rollout engine) with each adversary's largest and mean reward, its solves and
the oracle's reward, then every hole and warning; ``--json`` prints the whole report instead.

Exit status: 0 no hole, 1 a hole (an adversary reached the oracle's reward without solving),
3 no hole but the audit is incomplete (episodes raised, or the oracle solved no seed).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import vista_rl
from vista_rl.audit import (
    EXIT_HOLE,
    EXIT_INCOMPLETE,
    PATHS,
    Adversary,
    AuditReport,
    PathName,
    adversaries_named,
    all_adversaries,
    audit_rewards,
)
from vista_rl.config import RunConfig, load_config
from vista_rl.errors import VistaError
from vista_rl.turn_limit import with_env_turn_limit

_PATH_TITLES = {"step": "env.step", "engine": "rollout engine"}


def audit_config(env_id: str, config_path: Path | None, sets: tuple[str, ...]) -> RunConfig:
    """The run config of the audit: the file, then ``env.id=ENV``, then ``--set`` overrides.  The turn
    budget is a run's (:mod:`vista_rl.turn_limit`): ``rollout.max_turns`` when the config sets it,
    else the env's own limit, else the default, because a reward paid per turn is farmed only over as
    many turns as the runs play."""
    config = load_config(RunConfig, config_path, overrides=[f"env.id={json.dumps(env_id)}", *sets])
    return with_env_turn_limit(config)


def _check_env(config: RunConfig) -> None:
    """Make and close the env once, so a typo in its id or config is one clear error, not an error
    in every episode."""
    try:
        vista_rl.make_env(config.env.id, **config.env.config).close()
    except VistaError:
        raise
    except Exception as exc:  # noqa: BLE001 - any construction failure becomes one message
        raise click.ClickException(f"could not create env {config.env.id}: {type(exc).__name__}: {exc}") from None


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def path_table(report: AuditReport, path: PathName) -> Table:
    """One row per adversary on ``path``: fits 80 columns (names are at most 20 characters)."""
    oracle = report.oracle_mean(path)
    judged = len(report.judged_seeds(path))
    table = Table(title=f"{_PATH_TITLES.get(path, path)}: oracle {_number(oracle)} (solved {judged}/"
                        f"{len(report.oracle.get(path, {}))})",
                  box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    table.add_column("adversary", no_wrap=True)
    table.add_column("max", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("solved", justify="right")
    table.add_column("oracle", justify="right")
    table.add_column("verdict")
    styles = {"HOLE": "bold red", "error": "dark_orange", "warn": "yellow", "ok": "green"}
    for row in report.rows:
        if row.path != path:
            continue
        table.add_row(row.adversary, _number(row.max_reward), _number(row.mean_reward),
                      f"{row.solved}/{len(row.episodes)}", _number(oracle),
                      f"[{styles[row.verdict]}]{row.verdict}[/{styles[row.verdict]}]")
    return table


def print_report(console: Console, report: AuditReport) -> None:
    console.print(f"[bold]reward audit of {report.env_id}[/bold] (seeds {', '.join(map(str, report.seeds))}; "
                  f"{report.max_turns} turns an episode)")
    for path in report.paths:
        console.print(path_table(report, path))
    for finding in report.holes:
        console.print(f"[bold red]HOLE[/bold red] {finding.adversary} ({finding.path} path, seed {finding.seed}): "
                      f"{finding.message}", soft_wrap=False)
    for finding in report.warnings:
        console.print(f"[yellow]warning[/yellow] {finding.adversary} ({finding.path} path, seed {finding.seed}): "
                      f"{finding.message}")
    for episode in report.errors[:10]:
        console.print(f"[dark_orange]error[/dark_orange] {episode.policy} ({episode.path} path, seed "
                      f"{episode.seed}): {episode.error}")
    for note in [*report.notes, *report.skipped]:
        console.print(f"[dim]{note}[/dim]")
    if report.holes:
        names = sorted({finding.adversary for finding in report.holes})
        console.print(f"[bold red]{len(report.holes)} hole(s): {', '.join(names)} reached the oracle's reward "
                      "without solving[/bold red]")
    elif report.exit_code:
        console.print("[dark_orange]no hole found, but the audit is incomplete (see above)[/dark_orange]")
    else:
        console.print("[green]no hole: no adversary reached the oracle's reward without solving[/green]")


@click.group("audit")
def audit_group() -> None:
    """Audit an env: adversarial scripted policies against its reward."""


@audit_group.command("rewards")
@click.argument("env_id", required=False)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Run config YAML whose env.config and rollout settings apply (env.id is ENV_ID).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Config override, e.g. env.config.records_path=data/records.jsonl or rollout.reflection=true.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Seeds to play.")
@click.option("--seed", "first_seed", default=0, show_default=True, type=click.IntRange(min=0), help="First seed.")
@click.option("--adversary", "names", multiple=True, metavar="NAME",
              help="Play only this adversary (repeatable); `--list` names them.")
@click.option("--path", "path", type=click.Choice(["both", *PATHS]), default="both", show_default=True,
              help="env.step, the rollout engine, or both.")
@click.option("--list", "list_only", is_flag=True, help="List the adversaries and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (progress goes to stderr).")
def rewards_command(env_id: str | None, config_path: Path | None, sets: tuple[str, ...], seeds: int, first_seed: int,
                    names: tuple[str, ...], path: str, list_only: bool, as_json: bool) -> None:
    """Play adversarial policies against ENV_ID and compare their rewards with the oracle's.

    Exit status 1 when an adversary reaches the oracle's reward without solving the task, 3 when
    no hole was found but episodes raised or the oracle solved no seed."""
    if list_only:
        for adversary in all_adversaries():
            click.echo(f"{adversary.name:22} {adversary.family:8} {adversary.description}")
        return
    if not env_id:
        raise click.UsageError("give the env to audit: vista audit rewards ENV_ID")
    try:
        chosen = adversaries_named(names)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--adversary") from None
    config = audit_config(env_id, config_path, sets)
    _check_env(config)
    paths = [name for name in PATHS if path in ("both", name)]
    console = Console(stderr=as_json)
    report = _run(config, chosen, paths, range(first_seed, first_seed + seeds), console)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print_report(console, report)
    if report.holes:
        finders = ", ".join(sorted({finding.adversary for finding in report.holes}))
        raise AuditHole(f"{report.env_id}: reward hole(s) found by {finders}")
    if report.exit_code:
        raise AuditIncomplete(f"{report.env_id}: the audit is incomplete (episodes raised, or the oracle solved no seed)")


class AuditHole(click.ClickException):
    """An adversary reached the oracle's reward without solving: ``vista`` exits 1."""

    exit_code = EXIT_HOLE


class AuditIncomplete(click.ClickException):
    """No hole found, but episodes raised or the oracle solved no seed: ``vista`` exits 3."""

    exit_code = EXIT_INCOMPLETE


def _run(config: RunConfig, chosen: list[Adversary], paths: list[PathName], seeds: range,
         console: Console) -> AuditReport:
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(f"audit {config.env.id}", total=None)

        def on_episode(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return audit_rewards(config.env.id, config.env.config, rollout=config.rollout, seeds=list(seeds),
                             adversaries=chosen, paths=paths, run_seed=config.seed,
                             on_episode=on_episode)

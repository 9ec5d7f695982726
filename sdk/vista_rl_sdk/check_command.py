"""``vista check-env ENV_ID``: run the conformance check on an installed env, and optionally write a
contact sheet of what the model sees.

Why a command when the generated plugin's tests already run ``check_env``: an author (or a user
about to train on someone's env) can check any installed env in one line, with the same config the
plugin's conformance test uses (the ``check_args`` given to ``register``), and ``--sheet`` shows the
pixels, which no functional check judges.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import click

import vista_rl
from vista_rl_sdk.checks import CheckFailure, CheckReport, CheckWarning, check_env
from vista_rl_sdk.contact_sheet import write_sheet


def _config(spec_args: dict[str, Any], config_json: str | None) -> dict[str, Any]:
    if config_json is None:
        config = spec_args.get("config", {})
        return dict(config) if isinstance(config, dict) else {}
    try:
        config = json.loads(config_json)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--config") from None
    if not isinstance(config, dict):
        raise click.BadParameter("must be a JSON object, e.g. '{\"size\": 5}'", param_hint="--config")
    return config


def _print_report(report: CheckReport, problems: list[str]) -> None:
    for what in report.passed:
        click.echo(f"  ok    {what}")
    for what in report.warnings:
        click.secho(f"  WARN  {what}", fg="yellow")
    for what in problems:
        click.secho(f"  FAIL  {what}", fg="red")


@click.command("check-env")
@click.argument("env_id")
@click.option("--config", "config_json", default=None, metavar="JSON",
              help="The env's config as a JSON object (default: the check_args config the plugin registered).")
@click.option("--seeds", type=click.IntRange(1, 64), default=3, show_default=True,
              help="How many seeds (0, 1, ...) to reset and compare.")
@click.option("--sheet", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a PNG contact sheet of each seed's first observation: look at what the model sees.")
@click.option("--no-cross-process", is_flag=True, help="Skip the determinism check in a fresh process (faster).")
def check_env_command(env_id: str, config_json: str | None, seeds: int, sheet: Path | None,
                      no_cross_process: bool) -> None:
    """Run vista-rl-sdk's check_env on the installed env ENV_ID: resets, determinism, placeholders,
    the oracle step, invalid and garbage steps, close.  Exits 1 when a check fails."""
    spec = vista_rl.host().spec("envs", env_id)  # an unknown id fails here, suggesting close ones
    check_args = dict(spec.metadata.get("check_args") or {})
    config = _config(check_args, config_json)
    seed_list = list(range(seeds))
    if sheet is not None:
        written = write_sheet(lambda: vista_rl.make_env(spec.id, **config), seed_list, sheet)
        click.echo(f"Contact sheet of seeds 0-{seeds - 1}: {written}  (open it: is that what the model should see?)")
    valid_action = check_args.get("valid_action")
    click.echo(f"check_env {spec.id} ({spec.distribution} {spec.version}), config {json.dumps(config)}")
    try:
        with warnings.catch_warnings():  # the report's warnings are printed below, once
            warnings.simplefilter("ignore", CheckWarning)
            report = check_env(spec.id, config, seeds=seed_list, cross_process=not no_cross_process,
                               valid_action=valid_action if isinstance(valid_action, str) else None)
    except CheckFailure as failure:
        _print_report(failure.report or CheckReport(spec.id), failure.problems)
        raise click.ClickException(f"{spec.id} failed {len(failure.problems)} check(s)") from None
    _print_report(report, [])
    click.echo(f"{spec.id} passed {len(report.passed)} checks" + (f", {len(report.warnings)} warning(s)"
                                                                  if report.warnings else ""))

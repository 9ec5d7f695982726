"""``vista eval``: run a policy on an env with the rollout engine, save every trajectory and report
metrics with 95% confidence intervals.

Flags and a YAML run config combine in this order: the YAML file (``vista eval run.yaml`` or
``--config``), then flags given on the command line, then ``--set key=value`` overrides.  Without a
config file every flag applies with its default (greedy decoding by default), except ``--max-turns``:
unset, episodes play the env's own turn limit.  The run itself is :func:`vista_rl.evaluate`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from vista_rl.api import evaluate
from vista_rl.cli.trajectories import metrics_table
from vista_rl.eval_run import RunSetupError, cut_off_note, run_eval
from vista_rl.turn_limit import DEFAULT_MAX_TURNS

__all__ = ["config_overrides", "eval_command", "parse_model_spec", "run_eval"]

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


def config_overrides(ctx: click.Context, config_path: Path | None, values: dict[str, Any],
                     sets: tuple[str, ...]) -> list[str]:
    """The flags (and ``--set``) as config overrides, after checking that env and model are named."""
    if config_path is None and not values.get("env_id"):
        raise click.UsageError("give --env ID (or a run config file with an env section)")
    if config_path is None and not values.get("model_spec"):
        raise click.UsageError("give --model BACKEND:PATH_OR_URL (or a run config file with a model section)")
    return [*_flag_overrides(ctx, values, with_config=config_path is not None), *sets]


@click.command("eval")
@click.argument("config_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--config", "config_option", type=click.Path(dir_okay=False, path_type=Path),
              help="Run config YAML (same as the positional CONFIG_FILE).")
@click.option("--env", "env_id", help="Registered env id, e.g. oddshape/odd-colour-v0.")
@click.option("--model", "model_spec", help="BACKEND:PATH_OR_URL, e.g. scripted:oracle, scripted:random (a uniform "
              "choice among the env's declared actions) or transformers:./tiny.")
@click.option("--episodes", default=20, show_default=True, type=click.IntRange(min=1), help="Seeds to run.")
@click.option("--group-size", default=1, show_default=True, type=click.IntRange(min=1), help="Samples per seed.")
@click.option("--max-turns", default=None, type=click.IntRange(min=1),
              help="Model turns per episode (rollout.max_turns). Default: the env's own turn limit "
                   f"(Env.turn_limit()), else {DEFAULT_MAX_TURNS}; episodes a limit the env did not choose "
                   "cuts short are counted and reported.")
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
@click.option("--strict", is_flag=True,
              help="Refuse a config that names code outside the installed VISTA plugins (an ImportTarget field, "
                   "such as the svg env's encoder) before anything is imported; VISTA_STRICT_PLUGINS=1 does too.")
@click.pass_context
def eval_command(ctx: click.Context, config_file: Path | None, config_option: Path | None, sets: tuple[str, ...],
                 no_html: bool, resume: bool, overwrite: bool, strict: bool, **values: Any) -> None:
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
    overrides = config_overrides(ctx, config_path, values, sets)
    console = Console()
    try:
        result = evaluate(config_path if config_path is not None else {}, overrides=overrides, html=not no_html,
                          resume=resume, overwrite=overwrite, console=console, strict=strict or None)
    except RunSetupError as exc:
        raise click.ClickException(str(exc)) from None
    summary, out = result.summary, result.run_dir
    console.print(metrics_table(summary, f"{result.config.env.id} · {summary['model']}"))
    if summary["failures"]:
        console.print(f"[dark_orange]{summary['failures']} episode(s) failed; e.g. "
                      f"{summary['failure_examples'][0]}[/dark_orange]", soft_wrap=True)
    note = cut_off_note(summary)
    if note:
        console.print(f"[dark_orange]{note}[/dark_orange]", soft_wrap=True)
    if summary["tokens_estimated"]:
        console.print("[dim]tokens estimated from text length (the backend reports no token ids)[/dim]")
    console.print(f"trajectories, metrics and viewer written to {out} "
                  f"(vista trajectories show {out}; open {out / 'trajectories.html'})", soft_wrap=True)

"""``vista mcts search`` and ``vista mcts build``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


def _pairs(values: tuple[str, ...], option: str) -> dict[str, Any]:
    """``key=value`` options; values are JSON when they parse (numbers, booleans, lists), else text."""
    parsed: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint=option)
        try:
            parsed[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key.strip()] = raw
    return parsed


@click.group(name="mcts")
def mcts_group() -> None:
    """ViGoRL's MCTS over thought steps: search trees with a teacher, then build SFT chains."""


@mcts_group.command(name="search")
@click.argument("tasks", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="trees JSONL (appended to; finished samples are skipped on a rerun)")
@click.option("--model", "model_id", required=True, help="registered model backend id (see `vista models`)")
@click.option("-M", "--model-arg", "model_args", multiple=True, help="backend config key=value (repeatable)")
@click.option("--judge", "judge_id", default="exact", show_default=True, help="registered judge id")
@click.option("-J", "--judge-arg", "judge_args", multiple=True, help="judge config key=value (repeatable)")
@click.option("--preset", type=click.Choice(["vigorl", "library"]), default="vigorl", show_default=True,
              help="vigorl: the data-generation script's settings; library: the class defaults")
@click.option("--set", "settings_args", multiple=True, help="search setting key=value, e.g. n_simulations=4")
@click.option("--prompt", type=click.Choice(["spatial", "web_grounding", "web_action"]), default="spatial",
              show_default=True, help="ViGoRL system prompt to use")
@click.option("--system-prompt", default=None, help="system prompt text (overrides --prompt)")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256),
              help="searches in parallel (each with its own backend and judge)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--limit", default=None, type=click.IntRange(1), help="only the first N tasks")
def search_command(tasks: Path, out: Path, model_id: str, model_args: tuple[str, ...], judge_id: str,
                   judge_args: tuple[str, ...], preset: str, settings_args: tuple[str, ...], prompt: str,
                   system_prompt: str | None, workers: int, seed: int, limit: int | None) -> None:
    """Run MCTS on every task record in TASKS (vista TaskRecord JSONL) and append trees to --out."""
    from pydantic import ValidationError
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import vista_rl
    from vista_plugin_vigorl.mcts.runner import finished_ids, load_tasks, repair_tail, run_searches
    from vista_plugin_vigorl.mcts.search import MctsSettings
    from vista_plugin_vigorl.mcts.steps import SYSTEM_PROMPTS

    console = Console(stderr=True)
    try:
        overrides = _pairs(settings_args, "--set")
        settings = (MctsSettings.vigorl_run(**overrides) if preset == "vigorl" else MctsSettings(**overrides))
    except (ValidationError, TypeError) as exc:
        raise click.UsageError(f"bad search settings: {exc}") from exc
    model_config, judge_config = _pairs(model_args, "-M"), _pairs(judge_args, "-J")
    try:  # fail fast on unknown ids or bad config, before any search starts
        vista_rl.host().spec("models", model_id)
        vista_rl.make_judge(judge_id, **judge_config)
    except vista_rl.VistaError as exc:
        raise click.UsageError(str(exc)) from exc
    except (TypeError, ValueError) as exc:
        raise click.UsageError(f"judge {judge_id!r}: {exc}") from exc
    records, bad = load_tasks(tasks)
    for number, why in bad[:5]:
        console.print(f"[yellow]{tasks}:{number}: skipped ({why})[/]")
    records = records[:limit] if limit else records
    repair_tail(out)
    already = len({r.id for r in records} & finished_ids(out))
    with Progress(TextColumn("MCTS"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[info]}"), console=console) as progress:
        bar = progress.add_task("search", total=len(records), completed=already, info="")
        found = [0, 0]

        def done(row: dict[str, Any]) -> None:
            found[0] += 1
            found[1] += int(not row.get("error") and float(row.get("root_value", 0.0)) > 0)
            progress.update(bar, advance=1, info=f"{found[1]}/{found[0]} with a correct rollout")

        summary = run_searches(records, out, lambda: vista_rl.make_model(model_id, **model_config),
                               lambda: vista_rl.make_judge(judge_id, **judge_config), settings,
                               system_prompt if system_prompt is not None else SYSTEM_PROMPTS[prompt],
                               seed=seed, workers=workers, on_done=done)
    for task_id, why in summary.failed[:5]:
        console.print(f"[red]{task_id}: search failed: {why}[/]")
    summary.bad_lines = bad
    click.echo(json.dumps(summary.to_dict()))


@mcts_group.command(name="build")
@click.argument("trees", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="SFT records JSONL (use as sft.path with sft.source: jsonl)")
@click.option("--max-chains", default=10_000, show_default=True, type=click.IntRange(1),
              help="chains kept per sample (a seeded random subset)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--system-prompt", default=None, help="system prompt of the records (default: the search's)")
@click.option("--chains-text", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="also write every chain to this text file")
def build_command(trees: Path, out: Path, max_chains: int, seed: int, system_prompt: str | None,
                  chains_text: Path | None) -> None:
    """Linearise the trees in TREES into reasoning chains and write SFT records to --out."""
    from vista_plugin_vigorl.mcts.build import build_records

    summary = build_records(trees, out, max_chains=max_chains, seed=seed, system_prompt=system_prompt,
                            chains_text=chains_text)
    for sample_id, why in summary.skipped[:5]:
        click.echo(f"skipped {sample_id}: {why}", err=True)
    if summary.chains == 0:
        click.echo(json.dumps(summary.to_dict()))
        raise click.ClickException(f"{trees}: no correct rollouts in any tree, so no chains were written")
    click.echo(json.dumps(summary.to_dict()))

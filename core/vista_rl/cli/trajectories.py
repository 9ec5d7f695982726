"""``vista trajectories show RUN_DIR``: a run's metrics, an episode table and episodes turn by turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vista_rl.errors import VistaError
from vista_rl.observation import IMAGE_PLACEHOLDER
from vista_rl.store.html import metric_rows
from vista_rl.store.reader import RunReader, episode_status

_CLIP = 1200


def _clip(text: str, limit: int = _CLIP) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters]"


def _with_image_marks(text: str, refs: list[str]) -> str:
    pieces = text.split(IMAGE_PLACEHOLDER)
    out = []
    for index, piece in enumerate(pieces):
        out.append(piece)
        if index < len(pieces) - 1:
            out.append(f"[image {refs[index][:10]}]" if index < len(refs) else "[image ?]")
    return "".join(out)


def metrics_table(metrics: dict[str, Any], title: str) -> Table:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value [95% CI]")
    table.add_column("n", justify="right")
    for row in metric_rows(metrics):  # the viewer's rows: one formatting, total on odd values
        table.add_row(row["name"], row["value"], row["n"])
    return table


_STYLES = {"error": "dark_orange", "success": "green", "failed": "red"}


def _status(record: dict[str, Any]) -> Text:
    status = episode_status(record)
    return Text(status, style=_STYLES[status])


def episode_panel(index: int, record: dict[str, Any]) -> Panel:
    items: list[Any] = []
    if record.get("failure"):
        items.append(Text(f"failure: {record['failure']}", style="dark_orange"))
    for number, turn in enumerate(record.get("turns", []), start=1):
        observation = _with_image_marks(turn.get("observation", ""), turn.get("image_refs", []))
        items.append(Text(f"observation {number}: ", style="bold blue") + Text(_clip(observation)))
        items.append(Text(f"response {number}: ", style="bold green") + Text(_clip(turn.get("response", ""))))
        for call in turn.get("tool_calls", []):
            style = "red" if call.get("error") else "magenta"
            items.append(Text(f"  tool {call.get('name')}({call.get('arguments')}) -> ", style=style)
                         + Text(_clip(str(call.get("result_text", "")), 300)))
        info = {k: v for k, v in turn.get("info", {}).items() if k != "finish_reason"}
        items.append(Text(f"  reward {turn.get('reward', 0):.3g}  info {info}", style="dim"))
    final = record.get("metadata", {}).get("final_observation")
    if final:
        items.append(Text("final observation: ", style="bold blue") + Text(_clip(final)))
    title = (f"#{index} {record.get('env_id')} seed {record.get('seed')} sample {record.get('sample_index', 0)} "
             f"· reward {record.get('total_reward', 0):.3g}")
    return Panel(Group(*items), title=title, subtitle=_status(record), title_align="left")


@click.group("trajectories")
def trajectories_group() -> None:
    """Look at the trajectories of a run directory."""


@trajectories_group.command("show")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--episode", "episodes", type=int, multiple=True, help="Show this episode in full (repeatable).")
@click.option("--only", type=click.Choice(["all", "success", "failed", "error"]), default="all", show_default=True)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0),
              help="Episodes listed in the table (and shown in full with --full).")
@click.option("--full", is_flag=True, help="Show the listed episodes turn by turn.")
def show_command(run_dir: Path, episodes: tuple[int, ...], only: str, limit: int, full: bool) -> None:
    """Metrics, a table of episodes, and chosen episodes turn by turn."""
    try:
        reader = RunReader(run_dir)
    except VistaError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    config = reader.config()
    env_id = config.get("env", {}).get("id", "?") if isinstance(config.get("env"), dict) else "?"
    metrics = reader.metrics()
    if metrics:
        console.print(metrics_table(metrics, f"{run_dir} · {env_id}"))
    table = Table(title="episodes")
    for column in ("#", "seed", "sample", "status", "reward", "turns", "stop", "failure"):
        table.add_column(column, overflow="fold")
    wanted = set(episodes)
    panels: list[Panel] = []
    listed = total = 0
    malformed = 0
    for index, record in enumerate(reader.records()):
        total += 1
        try:  # a record of the wrong shape is counted and skipped, the rest are shown
            status = _status(record)
            if index in wanted:
                panels.append(episode_panel(index, record))
            if only != "all" and status.plain != only:
                continue
            if listed < limit:
                meta = record.get("metadata") or {}
                row = (str(index), str(record.get("seed")), str(record.get("sample_index", 0)), status,
                       f"{float(record.get('total_reward') or 0):.3g}", str(record.get("num_turns", 0)),
                       str(meta.get("stop_reason", "")), _clip(str(record.get("failure") or ""), 80))
                table.add_row(*row)
                listed += 1
                if full and index not in wanted:
                    panels.append(episode_panel(index, record))
        except Exception:  # noqa: BLE001
            malformed += 1
    console.print(table)
    skipped = reader.skipped_lines + malformed
    console.print(f"{listed} of {total} episode(s) listed"
                  + (f"; {skipped} unreadable line(s) skipped" if skipped else ""))
    missing = sorted(wanted - set(range(total)))
    if missing:
        console.print(f"[red]no episode(s) {missing}: the run has {total}[/red]")
    for panel in panels:
        console.print(panel)


@trajectories_group.command("html")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write [default: RUN_DIR/trajectories.html].")
@click.option("--limit", default=None, type=click.IntRange(min=1),
              help="Episodes on the page, the rest stay in the JSONL [default: 2000].")
def html_command(run_dir: Path, out: Path | None, limit: int | None) -> None:
    """(Re)write the run's HTML viewer, e.g. for a run made with --no-html or an older VISTA."""
    from vista_rl.store.html import DEFAULT_LIMIT, render_html

    try:
        report = render_html(run_dir, out, limit=limit or DEFAULT_LIMIT)
    except VistaError as exc:
        raise click.ClickException(str(exc)) from None
    skipped = f"; {report.skipped} unreadable line(s) of the JSONL skipped" if report.skipped else ""
    click.echo(f"viewer written to {report.path} ({report.episodes} episode(s){skipped})")

"""``vista plugins`` and ``vista envs|tools|judges|estimators|models|datasets|engines``.

The tables must read at 80 columns (a default terminal): ids and distribution names never wrap
(a folded id cannot be copied), long text goes into one wrapping column, and load errors and
warnings are printed as whole lines below the table instead of a narrow column of their own.  The
import target of an item is shown only where it fits (120 columns or more); ``--json`` has it all.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vista_rl._plugins import KINDS, PluginInfo, host

#: From this console width on, the item tables add the import target as a column of its own.
WIDE = 120


def _print_problems(console: Console, infos: list[PluginInfo]) -> None:
    """Each plugin's load errors (red) and warnings (yellow), each a paragraph of its own."""
    for info in infos:
        where = f"plugin {escape(info.name)} ({escape(info.distribution)} {escape(info.version)})"
        for error in info.errors:
            console.print(f"[red]{where}: {escape(error)}[/red]")
        for warning in info.warnings:
            console.print(f"[yellow]{where}: {escape(warning)}[/yellow]")


def _provides(info: PluginInfo) -> str:
    """The items by kind (ids separated by ", " so rich wraps between ids, never inside one), the hooks,
    and a count of the problems listed under the table."""
    lines = [f"[bold]{kind}[/bold]: {', '.join(sorted(ids))}" for kind, ids in sorted(info.items.items()) if ids]
    lines.append(f"[dim]hooks: {', '.join(sorted(info.hooks)) or '-'}[/dim]")
    if info.errors:
        lines.append(f"[red]{len(info.errors)} error(s), listed below[/red]")
    if info.warnings:
        lines.append(f"[yellow]{len(info.warnings)} warning(s), listed below[/yellow]")
    return "\n".join(lines)


def plugins_command() -> click.Command:
    @click.command("plugins")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
    def plugins(as_json: bool, show_all: bool) -> None:
        """List installed plugins: distribution, version, items, hooks and load errors."""
        infos = [info for info in host().plugins() if show_all or not info.builtin]
        if as_json:
            click.echo(json.dumps([info.to_dict() for info in infos], indent=2))
            return
        table = Table(title="VISTA plugins", show_lines=True)
        table.add_column("plugin", no_wrap=True)
        table.add_column("provides", overflow="fold", ratio=1)
        for info in infos:
            name = f"[bold]{escape(info.name)}[/bold]\n{escape(info.distribution)}\n[dim]{escape(info.version)}[/dim]"
            table.add_row(name, _provides(info))
        console = Console()
        console.print(table)
        _print_problems(console, infos)

    return plugins


def kind_command(kind: str) -> click.Command:
    @click.command(kind)
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output (with each item's import target).")
    def list_items(as_json: bool) -> None:
        specs = list(host().registry(kind))
        if as_json:
            click.echo(json.dumps([spec.to_dict() for spec in specs], indent=2))
            return
        console = Console()
        wide = console.width >= WIDE
        table = Table(title=f"VISTA {kind}")
        table.add_column("id", no_wrap=True)
        table.add_column("description", overflow="fold", ratio=2)
        if wide:
            table.add_column("target", overflow="fold", ratio=1)
        for spec in specs:
            about = f"{escape(spec.description)}\n[dim]from {escape(spec.distribution)} {escape(spec.version)}[/dim]"
            table.add_row(escape(spec.id), about, *([escape(spec.target_path)] if wide else []))
        console.print(table)
        _print_problems(console, [info for info in host().plugins() if info.errors])

    list_items.help = f"List registered {kind}: id, description and the providing distribution."
    return list_items


def all_listing_commands() -> list[click.Command]:
    return [plugins_command(), *(kind_command(kind) for kind in KINDS)]

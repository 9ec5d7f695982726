"""``vista plugins`` and ``vista envs|tools|judges|estimators|models|datasets|engines``."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vista_rl._plugins import KINDS, host


def plugins_command() -> click.Command:
    @click.command("plugins")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
    def plugins(as_json: bool, show_all: bool) -> None:
        """List installed plugins: distribution, version, hooks, items and load errors."""
        infos = [info for info in host().plugins() if show_all or not info.builtin]
        if as_json:
            click.echo(json.dumps([info.to_dict() for info in infos], indent=2))
            return
        table = Table(title="VISTA plugins")
        for column in ("plugin", "distribution", "version", "hooks", "items", "errors / warnings"):
            table.add_column(column, overflow="fold")
        for info in infos:
            items = "\n".join(f"{kind}: {', '.join(sorted(ids))}" for kind, ids in sorted(info.items.items()))
            table.add_row(info.name, info.distribution, info.version, "\n".join(info.hooks), items,
                          "\n".join([f"[red]{escape(error)}[/red]" for error in info.errors]
                                    + [f"[yellow]{escape(warning)}[/yellow]" for warning in info.warnings]))
        Console().print(table)

    return plugins


def kind_command(kind: str) -> click.Command:
    @click.command(kind)
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def list_items(as_json: bool) -> None:
        specs = list(host().registry(kind))
        errors = [(info, error) for info in host().plugins() for error in info.errors]
        if as_json:
            click.echo(json.dumps([spec.to_dict() for spec in specs], indent=2))
            return
        table = Table(title=f"VISTA {kind}")
        for column in ("id", "description", "distribution", "version", "target"):
            table.add_column(column, overflow="fold")
        for spec in specs:
            table.add_row(spec.id, spec.description, spec.distribution, spec.version, spec.target_path)
        console = Console()
        console.print(table)
        for info, error in errors:
            console.print(f"[red]plugin {escape(info.name)} ({info.distribution} {info.version}): {escape(error)}[/red]")

    list_items.help = f"List registered {kind}."
    return list_items


def all_listing_commands() -> list[click.Command]:
    return [plugins_command(), *(kind_command(kind) for kind in KINDS)]

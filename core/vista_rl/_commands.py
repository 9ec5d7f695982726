"""Who owns each ``vista`` command: a second distribution cannot replace ``serve`` or ``tool-server``.

``register_commands`` hands every plugin the real click group, and ``cli.add_command`` silently
replaces a command of the same name, so load order used to decide which ``serve`` ran.  The guard
snapshots the command tree (top-level commands and the subcommands of every group) around each
plugin's call.  A command path that a call replaced or removed is a clash: the owner is kept (a
first-party command beats a third-party one, otherwise the first registered stays), the other is
undone, and the clash is reported naming both distributions (an error of the loser, so
``VISTA_STRICT_PLUGINS=1`` refuses it).  Adding subcommands to an existing group (the datasets
plugin extends ``vista data``) changes no existing path and is no clash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click

CommandPath = tuple[str, ...]


def command_tree(group: click.Group) -> dict[CommandPath, click.Command]:
    """Every command reachable from ``group`` by name, keyed by its path of names."""
    tree: dict[CommandPath, click.Command] = {}

    def walk(parent: click.Group, prefix: CommandPath, seen: set[int]) -> None:
        if id(parent) in seen:  # a group added under itself: stop, never recurse forever
            return
        seen = seen | {id(parent)}
        for name, command in list(parent.commands.items()):
            path = (*prefix, name)
            tree[path] = command
            if isinstance(command, click.Group):
                walk(command, path, seen)

    walk(group, (), set())
    return tree


@dataclass(frozen=True)
class Owner:
    """The plugin that added a command: its ``distribution version (plugin 'name')`` and standing."""

    describe: str
    distribution: str
    key: str
    first_party: bool


@dataclass(frozen=True)
class CommandClash:
    """A command path that two plugins added; ``kept`` serves it, ``refused`` was undone."""

    path: CommandPath
    kept: Owner
    refused: Owner

    @property
    def name(self) -> str:
        return " ".join(self.path)

    def message(self) -> str:
        return (f"command clash: `vista {self.name}` is registered by {self.kept.describe} and by "
                f"{self.refused.describe}; {self.kept.distribution}'s is kept "
                f"({'first-party' if self.kept.first_party else 'registered first'}) and "
                f"{self.refused.distribution}'s is ignored. To remove it set "
                f"VISTA_DISABLE_PLUGINS={self.refused.key}.")


class CommandGuard:
    """Tracks the owner of every command path of one click group across plugins' calls."""

    def __init__(self, group: click.Group) -> None:
        self.group = group
        self._owners: dict[CommandPath, Owner] = {}

    def before(self) -> dict[CommandPath, click.Command]:
        return command_tree(self.group)

    def after(self, snapshot: dict[CommandPath, click.Command], owner: Owner,
              report: Callable[[CommandClash], None]) -> None:
        """Settle what one plugin's call changed: record new commands, undo or accept replacements."""
        now = command_tree(self.group)
        clashes: list[CommandClash] = []
        for path, before in snapshot.items():
            after = now.get(path)
            if after is before or path[:-1] and path[:-1] not in now:
                continue  # unchanged, or its parent went away (handled at the parent's path)
            previous = self._owners.get(path)
            if previous is None or previous.key == owner.key:
                self._owners[path] = owner  # an unowned command (built before the guard) or its owner's own
                continue
            if after is not None and owner.first_party and not previous.first_party:
                clashes.append(CommandClash(path, kept=owner, refused=previous))
                self._owners[path] = owner
                continue
            self._parent(path).add_command(before, path[-1])  # undo: the owner keeps its command
            clashes.append(CommandClash(path, kept=previous, refused=owner))
        for path in command_tree(self.group):
            self._owners.setdefault(path, owner)
        for clash in clashes:
            report(clash)

    def _parent(self, path: CommandPath) -> click.Group:
        group = self.group
        for name in path[:-1]:
            child = group.commands[name]
            assert isinstance(child, click.Group)
            group = child
        return group

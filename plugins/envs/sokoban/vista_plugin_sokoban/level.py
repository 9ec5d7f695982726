"""Sokoban levels as flat cell indices, and the one move rule everything else uses.

A cell is ``row * width + col``; the border is always wall, so ``cell + delta`` never leaves the
grid.  A state is ``(player, boxes)`` with ``boxes`` a sorted tuple: hashable, cheap to copy, and the
same key in the solver, the generator's reverse search and the env.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

ACTION_NAMES: tuple[str, ...] = ("Up", "Down", "Left", "Right")
State = tuple[int, tuple[int, ...]]

# Symbols of VAGEN's text grid.
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "√", "P", "S"


class Moved(enum.Enum):
    """What one :func:`move` did, named: the solver, the env's reward and its redraw each ask a
    different question of it (did anything change, was a box pushed)."""

    BLOCKED = "blocked"  # a wall, or a box that cannot go further: nothing changed
    WALKED = "walked"
    PUSHED = "pushed"  # the player moved and pushed the box ahead one cell

    @property
    def changed(self) -> bool:
        """Whether the state changed (anything but :attr:`BLOCKED`)."""
        return self is not Moved.BLOCKED


@dataclass(frozen=True)
class Level:
    """The fixed part of a level (walls, targets) plus the start state."""

    height: int
    width: int
    free: tuple[bool, ...]  # not a wall
    targets: tuple[int, ...]
    boxes: tuple[int, ...]
    player: int

    @property
    def deltas(self) -> tuple[int, int, int, int]:
        """Cell offsets of Up, Down, Left, Right."""
        return (-self.width, self.width, -1, 1)

    @property
    def start(self) -> State:
        return (self.player, self.boxes)

    def cell(self, index: int) -> tuple[int, int]:
        return divmod(index, self.width)

    def to_text(self, state: State | None = None, sep: str = "") -> str:
        """The grid in VAGEN's symbols (``sep="\\t"`` gives VAGEN's tab-separated rows)."""
        player, boxes = state or self.start
        box_set, target_set = set(boxes), set(self.targets)
        rows = []
        for row in range(self.height):
            symbols = []
            for col in range(self.width):
                index = row * self.width + col
                on_target = index in target_set
                if not self.free[index]:
                    symbols.append(WALL)
                elif index == player:
                    symbols.append(PLAYER_ON_TARGET if on_target else PLAYER)
                elif index in box_set:
                    symbols.append(BOX_ON_TARGET if on_target else BOX)
                else:
                    symbols.append(TARGET if on_target else FLOOR)
            rows.append(sep.join(symbols))
        return "\n".join(rows)


def parse_level(text: str) -> Level:
    """A level from VAGEN symbols (one row per line; spaces and tabs ignored; a wall border is added
    when the rows are not already enclosed)."""
    rows = ["".join(ch for ch in line if ch not in " \t") for line in text.strip().splitlines()]
    rows = [row for row in rows if row]
    if not rows:
        raise ValueError("empty level")
    width = max(len(row) for row in rows)
    rows = [row.ljust(width, WALL) for row in rows]
    enclosed = all(ch == WALL for ch in rows[0] + rows[-1]) and all(r[0] == WALL == r[-1] for r in rows)
    if not enclosed:
        rows = [WALL * (width + 2)] + [WALL + row + WALL for row in rows] + [WALL * (width + 2)]
        width += 2
    free, targets, boxes, players = [], [], [], []
    for row_index, row in enumerate(rows):
        for col_index, ch in enumerate(row):
            index = row_index * width + col_index
            if ch not in "#_OX√PS":
                raise ValueError(f"unknown symbol {ch!r} at row {row_index}, column {col_index}")
            free.append(ch != WALL)
            if ch in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.append(index)
            if ch in (BOX, BOX_ON_TARGET):
                boxes.append(index)
            if ch in (PLAYER, PLAYER_ON_TARGET):
                players.append(index)
    if len(players) != 1:
        raise ValueError(f"a level needs exactly one player, found {len(players)}")
    if len(boxes) != len(targets) or not boxes:
        raise ValueError(f"a level needs as many boxes as targets (and at least one): {len(boxes)} vs {len(targets)}")
    return Level(len(rows), width, tuple(free), tuple(targets), tuple(sorted(boxes)), players[0])


def move(level: Level, state: State, action: int) -> tuple[State, Moved]:
    """Apply one action.  Returns the new state and what happened (:class:`Moved`); a blocked move
    returns ``state`` itself."""
    player, boxes = state
    delta = level.deltas[action]
    ahead = player + delta
    if not level.free[ahead]:
        return state, Moved.BLOCKED
    if ahead in boxes:
        beyond = ahead + delta
        if not level.free[beyond] or beyond in boxes:
            return state, Moved.BLOCKED
        moved = tuple(sorted(beyond if box == ahead else box for box in boxes))
        return (ahead, moved), Moved.PUSHED
    return (ahead, boxes), Moved.WALKED

"""Scripted zoom-small teachers with a systematic, stated error (issue 38), beside the perfect oracle.

Why: with a perfect teacher SFT alone reaches the ceiling, so "RL beats SFT" only says SFT stopped
early.  A teacher whose mistake is structural leaves a gap cloning cannot close.  The env picks one
with ``teacher: NAME`` (default ``oracle``: zooms at the named marker, for tests and ``check_env``);
only ``oracle_response`` changes, never the scene, the question or the reward.

- ``first_column``: a searcher that **always zooms at the first candidate region** of the row the
  question names: it reads the row from the question but zooms at the row's first (leftmost) marker,
  then answers the colour it sees there.  Right when the named marker is in the first column, or by
  chance when the marker it zoomed at has the same colour (about 0.5 + 0.5 / 4 on a 2x2 grid).
- ``coin_column``: a searcher that **reads the row from the question but never the column**: the
  column it zooms at is a coin, the CRC-32 of the scene's marker colours (reproducible, the same on
  every engine and process, unlike ``hash``), which does not depend on which marker the question
  names; it answers the colour it sees there.  Right when the coin lands on the named column, or by
  chance when the marker it zoomed at has the same colour (about 0.5 + 0.5 / 4 on a 2x2 grid, as
  ``first_column``).  Why a coin: the view is the same grey image for every seed, so the coin is
  invisible to the model, and a clone of this teacher zooms at both columns whatever the question
  says; RL then samples the named column on some episodes and can learn to read it from the question.
  A clone of ``first_column`` never zooms at the second column, so RL never sees that it pays
  (docs/main-job.md, "Tool job, seed 0, attempt 2").
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "zooms at the marker the question names (exact)",
    "first_column": "zooms at the first marker of the named row and answers what it sees there",
    "coin_column": "zooms in the named row at a column a coin picks (never reads the column) and answers what it sees",
}


def coin_column(colours: Sequence[str], grid: int) -> int:
    """The ``coin_column`` teacher's column for a scene: the CRC-32 of its marker colours (row by row)
    modulo ``grid``.  A function of the scene alone, never of the marker the question names."""
    return zlib.crc32("|".join(colours).encode()) % grid


def teacher_marker(teacher: str, target: int, grid: int, colours: Sequence[str] = ()) -> int:
    """The index (row by row) of the marker the teacher zooms at when asked about ``target``
    (``colours``: the scene's marker colours, row by row; ``coin_column`` needs them)."""
    if teacher == "oracle":
        return target
    if teacher == "first_column":
        return target - target % grid
    if teacher == "coin_column":
        if len(colours) != grid * grid:
            raise ValueError(f"coin_column needs the scene's {grid * grid} marker colours, got {len(colours)}")
        return target - target % grid + coin_column(colours, grid)
    raise ValueError(f"unknown zoom-small teacher {teacher!r}; choose from {sorted(TEACHERS)}")

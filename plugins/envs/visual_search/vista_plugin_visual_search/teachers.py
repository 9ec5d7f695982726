"""Scripted zoom-small teachers with a systematic, stated error (issue 38), beside the perfect oracle.

Why: with a perfect teacher SFT alone reaches the ceiling, so "RL beats SFT" only says SFT stopped
early.  A teacher whose mistake is structural leaves a gap cloning cannot close.  The env picks one
with ``teacher: NAME`` (default ``oracle``: zooms at the named marker, for tests and ``check_env``);
only ``oracle_response`` changes, never the scene, the question or the reward.

- ``first_column``: a searcher that **always zooms at the first candidate region** of the row the
  question names: it reads the row from the question but zooms at the row's first (leftmost) marker,
  then answers the colour it sees there.  Right when the named marker is in the first column, or by
  chance when the marker it zoomed at has the same colour (about 0.5 + 0.5 / 4 on a 2x2 grid).
"""

from __future__ import annotations

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "zooms at the marker the question names (exact)",
    "first_column": "zooms at the first marker of the named row and answers what it sees there",
}


def teacher_marker(teacher: str, target: int, grid: int) -> int:
    """The index (row by row) of the marker the teacher zooms at when asked about ``target``."""
    if teacher == "oracle":
        return target
    if teacher == "first_column":
        return target - target % grid
    raise ValueError(f"unknown zoom-small teacher {teacher!r}; choose from {sorted(TEACHERS)}")

"""Scripted zoom-spot teachers with a systematic, stated error (issue 38), beside the perfect oracle.

Why: with a perfect teacher SFT alone reaches the ceiling (docs/grounded-job.md: 1.000 after 260
steps), so "RL beats SFT" only says SFT stopped early.  A teacher whose grounding error is structural
leaves a gap cloning cannot close.  The env picks one with ``teacher: NAME`` (default ``oracle``: cites
and zooms at the frame, for tests and ``check_env``); only ``oracle_response`` changes.

- ``off_right``: a grounder that **cites the frame one cell off on the right side of the image**: when
  the frame is in the last column it cites and zooms at the place one column to the left, sees no dot
  there and answers a guess (the first colour).  Right on the other columns and by chance on the
  last: about 2/3 + 1/3 * 1/4 = 0.75 on a 3x3 grid.  (Unlike ``oracle_confusion``, its answer is what
  its own zoom supports, so its chains are what an honest but mis-grounded teacher writes.)
"""

from __future__ import annotations

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "cites and zooms at the frame (exact)",
    "off_right": "cites frames in the right column one cell to the left, then guesses the colour",
}


def teacher_place(teacher: str, index: int, grid: int) -> int:
    """The place (row by row) the teacher cites when the frame is at place ``index``."""
    if teacher == "oracle":
        return index
    if teacher == "off_right":
        return index - 1 if grid > 1 and index % grid == grid - 1 else index
    raise ValueError(f"unknown zoom-spot teacher {teacher!r}; choose from {sorted(TEACHERS)}")

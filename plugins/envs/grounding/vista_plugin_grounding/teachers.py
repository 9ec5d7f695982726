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
- ``coin_right``: ``off_right``'s error on most seeds, not all: on a last-column frame it cites the
  frame itself on 30% of seeds and one cell to the left on the other 70% (a CRC-32 of the seed:
  reproducible, the same on both engines).  About 2/3 + 1/3 * (0.3 + 0.7 * 1/4) = 0.825.  Why: a
  deterministic error is out of RL's reach once SFT has cloned it (the clone never samples the
  right column's x, docs/grounded-job.md); this teacher's clone keeps the right x in its support,
  as a minority, so greedy cloning still inherits the error and only a reward can flip it.
"""

from __future__ import annotations

import zlib

#: name -> what it gets wrong (``oracle`` is exact).
TEACHERS: dict[str, str] = {
    "oracle": "cites and zooms at the frame (exact)",
    "off_right": "cites frames in the right column one cell to the left, then guesses the colour",
    "coin_right": "as off_right on 70% of seeds (a CRC-32 of the seed), right on the other 30%",
}

#: ``coin_right``: the share of seeds on which it cites a last-column frame correctly.
COIN_RIGHT_SHARE = 0.3


def teacher_place(teacher: str, index: int, grid: int, seed: int = 0) -> int:
    """The place (row by row) the teacher cites on ``seed`` when the frame is at place ``index``."""
    if teacher == "oracle":
        return index
    off_by_one = index - 1 if grid > 1 and index % grid == grid - 1 else index
    if teacher == "off_right":
        return off_by_one
    if teacher == "coin_right":
        return index if coin(seed) < COIN_RIGHT_SHARE else off_by_one
    raise ValueError(f"unknown zoom-spot teacher {teacher!r}; choose from {sorted(TEACHERS)}")


def coin(seed: int) -> float:
    """A reproducible number in [0, 1) per seed (CRC-32, not ``random``: no state, any engine)."""
    return (zlib.crc32(f"zoom-spot|{seed}".encode()) % 1000) / 1000

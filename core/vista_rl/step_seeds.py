"""The env seeds each RL step trains on: one rule for every engine.

Step ``k`` (0-based) of a run draws ``trainer.seeds_per_step`` seeds from ``trainer.train_seeds`` with
a generator seeded by (run seed, step), so a resumed run repeats them and two engines given the same
config train on the same seeds in the same order (the verl engine writes its train rows in this
order and turns its data shuffle off).  The local engine's RL step imports it
(``tests/test_step_seeds.py`` checks it has no copy of its own).
"""

from __future__ import annotations

import random

from vista_rl.config import RunConfig


def step_seeds(run: RunConfig, step: int) -> list[int]:
    """The training seeds of RL step ``step`` (0-based)."""
    rng = random.Random(run.seed * 7_919 + step)
    return rng.sample(run.trainer.train_seeds.seeds(), run.trainer.seeds_per_step)


def run_step_seeds(run: RunConfig) -> list[int]:
    """Every RL step's seeds, step after step (``trainer.steps`` x ``trainer.seeds_per_step``)."""
    return [seed for step in range(run.trainer.steps) for seed in step_seeds(run, step)]

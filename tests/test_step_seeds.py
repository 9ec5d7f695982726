"""One rule for the seeds each RL step trains on (vista_rl.step_seeds), the one the local engine uses."""

from __future__ import annotations

import pytest

from vista_rl.config import RunConfig
from vista_rl.step_seeds import run_step_seeds, step_seeds


def _run(**trainer: object) -> RunConfig:
    return RunConfig.model_validate({"env": {"id": "x"}, "seed": 3, "trainer": {
        "steps": 4, "seeds_per_step": 5, "train_seeds": {"start": 100, "count": 50}, **trainer}})


def test_each_step_draws_its_own_seeds_from_the_train_range_reproducibly() -> None:
    run = _run()
    steps = [step_seeds(run, step) for step in range(4)]
    assert all(len(set(seeds)) == 5 and all(100 <= s < 150 for s in seeds) for seeds in steps)
    assert steps == [step_seeds(run, step) for step in range(4)] and steps[0] != steps[1]
    assert run_step_seeds(run) == [seed for seeds in steps for seed in seeds]


def test_it_is_the_local_engines_rule() -> None:
    rl_step = pytest.importorskip("vista_plugin_local.rl_step")
    run = _run()
    assert rl_step.step_seeds is step_seeds  # imported, not a copy that could drift
    assert [rl_step.step_seeds(run, step) for step in range(4)] == [step_seeds(run, step) for step in range(4)]

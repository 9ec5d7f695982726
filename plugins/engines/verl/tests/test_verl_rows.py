"""One owner per setting: the verl row carries the run's validated ``RolloutSection`` and nothing else
carries a rollout setting (no ``max_turns`` column, no Hydra ``max_assistant_turns``, no fallback
constant in the agent loop).  Runs without verl."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vista_plugin_verl.config import compose_overrides, engine_config
from vista_plugin_verl.dataset import RowError, env_rows, rollout_from_row, run_rows

from vista_rl.config import RolloutSection, RunConfig

RUN: dict[str, Any] = {
    "engine": "verl", "output_dir": "runs/x", "env": {"id": "oddshape/odd-colour-v0"}, "model": {"path": "m"},
    "rollout": {"max_turns": 7, "group_size": 4, "window_size": 0, "sampling": {"max_tokens": 64, "stop": ["</a>"]}},
    "trainer": {"steps": 2, "seeds_per_step": 8, "micro_batch_size": 2, "train_seeds": {"start": 0, "count": 50}},
    "eval": {"seeds": {"start": 1000, "count": 4}},
    "engine_config": {"verl": {"cluster": {"n_gpus_per_node": 4}}},
}


def test_the_row_carries_the_whole_validated_section_once() -> None:
    run = RunConfig.model_validate(RUN)
    rows = run_rows(run)
    for split in ("train", "val"):
        extra = rows[split][0]["extra_info"]
        assert set(extra) == {"env_id", "env_config", "seed", "rollout", "split", "index"}
        assert rollout_from_row(extra) == run.rollout
    assert json.loads(rows["train"][0]["extra_info"]["rollout"])["max_turns"] == 7


def test_max_turns_reaches_verl_only_through_the_rows() -> None:
    run = RunConfig.model_validate(RUN)
    overrides = compose_overrides(run, engine_config(run), "t.parquet", "v.parquet")
    assert not [item for item in overrides if "max_assistant_turns" in item]


@pytest.mark.parametrize(("extra", "message"), [
    ({"env_id": "e", "seed": 1}, r"extra_info\.rollout is missing"),
    ({"env_id": "e", "seed": 1, "max_turns": 3}, r"extra_info\.rollout is missing"),
    ({"rollout": '{"max_turns": 0}'}, r"extra_info\.rollout\.max_turns: "),
    ({"rollout": '{"max_turn": 3}'}, r"extra_info\.rollout\.max_turn: unknown key"),
])
def test_a_row_without_a_valid_section_is_an_error_not_a_default(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(RowError, match=message):
        rollout_from_row(extra)


def test_a_bad_mapping_fails_when_the_rows_are_written() -> None:
    with pytest.raises(RowError, match=r"rollout\.window_sise: unknown key"):
        env_rows("e", {}, [0], "train", {"window_sise": 2})
    (row,) = env_rows("e", {}, [0], "train", {"max_turns": 2})
    assert rollout_from_row(row["extra_info"]) == RolloutSection(max_turns=2)

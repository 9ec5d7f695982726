"""``EpisodeStats`` (issue 34 item 2): the typed record of an episode, serialised flat under
``Trajectory.metadata`` with the keys run directories have always had, so old records read back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RolloutSection
from vista_rl.rollout import EpisodeStats, RolloutEngine, episode_specs
from vista_rl.trajectory import Trajectory

#: what ``EpisodeDriver.finish`` wrote into every trajectory's metadata before EpisodeStats existed
KEYS_ALWAYS_WRITTEN = ["episode_index", "group_id", "stop_reason", "attempts", "generated_tokens", "tokens_estimated",
                       "context_tokens", "format_errors", "env_steps", "tool_calls", "turn_limit", "env_turn_limit",
                       "cut_off", "first_attempt_success"]


@pytest.fixture(autouse=True)
def plugins(vista_plugin: object) -> None:
    vista_plugin(RolloutTestPlugin())  # type: ignore[operator]


def test_the_record_keeps_the_keys_and_the_key_order_of_old_runs() -> None:
    assert [field.name for field in dataclasses.fields(EpisodeStats)] == KEYS_ALWAYS_WRITTEN
    assert list(EpisodeStats().to_metadata()) == KEYS_ALWAYS_WRITTEN
    with pytest.raises(dataclasses.FrozenInstanceError):
        EpisodeStats().attempts = 2  # type: ignore[misc]


def test_a_trajectory_of_the_engine_reads_back_from_its_json_line() -> None:
    settings = RolloutSection(max_turns=2, reflection=True, reflection_attempts=2)
    with RolloutEngine(CharTokenBackend(["<answer>inc</answer>"]), settings) as engine:
        trajectory, = engine.run(episode_specs("test/counter-v0", [4], env_config={"target": 1}))
    line = json.dumps(trajectory.to_dict())  # as the run store writes it
    stats = EpisodeStats.from_metadata(Trajectory.from_dict(json.loads(line)).metadata)
    assert stats == EpisodeStats(episode_index=0, group_id="test/counter-v0:4", stop_reason="done", attempts=1,
                                 generated_tokens=21, tokens_estimated=False, context_tokens=stats.context_tokens,
                                 format_errors=0, env_steps=1, tool_calls=0, turn_limit=2, env_turn_limit=None,
                                 cut_off=False, first_attempt_success=True)
    assert stats.context_tokens > 21


def test_an_old_record_missing_keys_reads_back_with_defaults() -> None:
    old = {"episode_index": 3, "stop_reason": "max_turns", "tool_calls": 2, "reset_info": {"seed": 1}}
    stats = EpisodeStats.from_metadata(old)
    assert (stats.episode_index, stats.stop_reason, stats.tool_calls) == (3, "max_turns", 2)
    assert (stats.attempts, stats.cut_off, stats.generated_tokens, stats.first_attempt_success) == (1, False, 0, None)
    assert EpisodeStats.from_metadata({}).stop_reason is None  # e.g. a record of a lost model worker


@pytest.mark.parametrize(("key", "value"), [("tool_calls", "3"), ("attempts", True), ("cut_off", 1),
                                            ("stop_reason", 7), ("generated_tokens", 2.5)])
def test_a_value_of_the_wrong_kind_is_an_error_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"trajectory metadata '{key}' should be"):
        EpisodeStats.from_metadata({key: value})

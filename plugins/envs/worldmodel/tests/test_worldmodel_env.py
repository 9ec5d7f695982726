"""The state-reward wrapper on the real grid games, through the core rollout engine: rewards per
turn, only on format-valid turns, VAGEN's weights, the ablation flag, and judge failures that cost
0 and never the episode."""

from __future__ import annotations

from typing import Any

import pytest

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl_sdk import check_env

SOKOBAN = {"env": "sokoban/sokoban-v0", "config": {"render_mode": "text"}}
SETTINGS = RolloutSection(max_turns=4, batch_size=4, env_timeout_s=60)


def _rollout(env_config: dict[str, Any], backend: Any, seeds: list[int]) -> list[Any]:
    with RolloutEngine(backend, SETTINGS, seed=0) as engine:
        return engine.run(episode_specs("worldmodel/state-reward-v0", seeds, 1, env_config))


def test_wrapper_passes_check_env() -> None:
    check_env("worldmodel/state-reward-v0", SOKOBAN, cross_process=False)


def test_oracle_turns_earn_both_rewards_per_turn() -> None:
    wrapped = _rollout(SOKOBAN, vista_rl.make_model("scripted", path="oracle"), [1, 2])
    plain_env = {"env": "sokoban/sokoban-v0", "config": {"render_mode": "text"}, "use_state_reward": False}
    plain = _rollout(plain_env, vista_rl.make_model("scripted", path="oracle"), [1, 2])
    for with_reward, without in zip(wrapped, plain, strict=True):
        assert with_reward.num_turns == without.num_turns > 0
        for turn, base in zip(with_reward.turns, without.turns, strict=True):
            assert turn.info["grounding_score"] == 1.0 and turn.info["worldmodeling_score"] == 1.0
            assert turn.info["grounding_reward"] == 0.5 and turn.info["worldmodeling_reward"] == 0.5
            assert turn.reward == pytest.approx(base.reward + 1.0)  # per turn, not lumped at the end
            assert base.info["state_reward"] == 0.0 and base.info["state_reward_details"]["skipped"]


def test_only_format_valid_turns_are_scored_and_weights_apply() -> None:
    env = vista_rl.make_env("worldmodel/state-reward-v0", **SOKOBAN, grounding_reward_weight=0.2,
                            worldmodeling_reward_weight=0.0)
    env.reset(seed=4)
    observation = env.oracle_response()
    assert observation is not None
    bad = env.step("The box is left of me. <answer>Up</answer>")  # no <think>: not format-valid
    assert bad.info["format_ok"] is False and bad.info["state_reward"] == 0.0
    assert bad.info["state_reward_details"] == {"skipped": "turn is not format-valid"}
    good = env.step(observation)
    assert good.info["format_ok"] is True
    assert good.info["grounding_reward"] == pytest.approx(0.2) and good.info["worldmodeling_reward"] == 0.0
    assert good.info["state_reward_details"]["worldmodeling"] == {"skipped": "weight is 0"}


def test_partly_right_observation_earns_part_of_the_reward() -> None:
    env = vista_rl.make_env("worldmodel/state-reward-v0", **SOKOBAN)
    _, info = env.reset(seed=4)
    truth = info["relations"]
    box = next(item for item in truth if item["object_id"] == "box")
    wrong = {"above": "below", "below": "above", "same": "above"}[box["vertical_relation"]]
    response = (f"<think><observation>The box is {wrong} the player.</observation><reasoning>go</reasoning>"
                f"<prediction>nothing</prediction></think><answer>Up</answer>")
    result = env.step(response)
    assert result.info["format_ok"] is True
    assert result.info["grounding_score"] == 0.0  # box wrong, target missing
    assert "no relation could be read" in result.info["state_reward_details"]["worldmodeling"]["error"]


def test_llm_judge_in_the_wrapper_with_known_verdicts() -> None:
    config = {**SOKOBAN, "grounding_judge": "worldmodel/grounding-llm",
              "worldmodeling_judge": "worldmodel/worldmodeling-llm",
              "judge_config": {"backend": "scripted", "backend_config": {"responses": ["YES"]},
                               "batch_wait_s": 0.05, "timeout_s": 5}}
    trajectories = _rollout(config, vista_rl.make_model("scripted", path="oracle"), [1, 2, 3])
    turns = [turn for trajectory in trajectories for turn in trajectory.turns]
    assert turns and all(turn.info["state_reward"] == 1.0 for turn in turns)
    assert all(turn.info["state_reward_details"]["grounding"]["verdict"] == "YES" for turn in turns)


def test_a_dead_judge_costs_zero_and_never_the_episode() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    config = {**SOKOBAN, "grounding_judge": "worldmodel/grounding-llm",
              "grounding_judge_config": {"backend": "openai", "backend_config": {"path": f"http://127.0.0.1:{port}/v1",
                                                                       "model": "none", "max_retries": 0},
                               "retries": 0, "timeout_s": 5, "batch_wait_s": 0.01}}
    (trajectory,) = _rollout(config, vista_rl.make_model("scripted", path="oracle"), [5])
    assert trajectory.failure is None and trajectory.num_turns > 0
    first = trajectory.turns[0].info
    assert first["grounding_score"] == 0.0 and first["judge_errors"]
    assert first["judge_errors"][0].startswith("grounding: ")
    assert first["worldmodeling_score"] == 1.0  # the rule judge still scores the prediction


def test_unknown_settings_are_config_errors() -> None:
    with pytest.raises(Exception, match="grounding_weight"):
        vista_rl.make_env("worldmodel/state-reward-v0", **SOKOBAN, grounding_weight=1.0)


def test_one_turns_two_llm_judgements_share_one_batched_call() -> None:
    env = vista_rl.make_env("worldmodel/state-reward-v0", **SOKOBAN,
                            grounding_judge="worldmodel/grounding-llm", worldmodeling_judge="worldmodel/worldmodeling-llm",
                            judge_config={"backend": "scripted", "backend_config": {"responses": ["NO", "YES"]},
                                          "batch_wait_s": 0.2, "timeout_s": 5, "cache_size": 0})
    service = env.judges["grounding"].service
    assert service is env.judges["worldmodeling"].service
    before = service.stats.generate_calls
    env.reset(seed=2)
    result = env.step(env.oracle_response() or "")
    assert service.stats.generate_calls == before + 1 and service.stats.last_batch == 2
    # the scripted replies come in order: NO for the grounding prompt, YES for the world-model prompt
    assert (result.info["grounding_score"], result.info["worldmodeling_score"]) == (0.0, 1.0)
    assert result.info["state_reward"] == 0.5

"""Grounded envs under the rollout engine: the engine runs ``search_coordinate`` and shows the call
turn to the env (``observe_tool_turn``), so ViGoRL's multi-turn unique-point bonus and
``info["grounded"]`` count the call turn's points (the bonus, as in ViGoRL, only the zoom coordinates); and ``grounding_reward`` (was ``reward_mode``)
leaves the answer-attempts ``reward_mode`` to the QA env."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

import vista_rl
from vista_rl import ModelBackend, ToolCallRecord
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs

ENV = "grounding/zoom-spot-v0"
SEED = 3


def call_turn(x: int, y: int) -> str:
    call = {"name": "search_coordinate", "arguments": {"coordinate": [x, y]}}
    return f"<think>The frame is at ({x}, {y}).</think><tool_call>{json.dumps(call)}</tool_call>"


def episode(seed: int) -> dict[str, Any]:
    return vista_rl.make_env(ENV).reset(seed=seed)[1]


def run(backend: ModelBackend, seeds: list[int], **config: Any) -> list[vista_rl.Trajectory]:
    with RolloutEngine(backend, RolloutSection()) as engine:
        return engine.run(episode_specs(ENV, seeds, env_config=config))


@pytest.mark.parametrize("execute_tools", [False, True])
def test_the_oracle_through_the_engine_is_grounded(execute_tools: bool) -> None:
    """The engine runs the zoom either way (the env offers the tool); the env counts the call turn
    once: its ``<think>`` point and the call's coordinate."""
    trajectories = run(vista_rl.make_model("scripted", path="oracle"), [0, 1, SEED], execute_tools=execute_tools)
    for trajectory in trajectories:
        call, answer = trajectory.turns
        assert call.tool_calls and call.tool_calls[0].name == "search_coordinate"
        info = answer.info
        assert trajectory.success and info["grounded"] is True
        assert info["points_cited"] == 2 and info["unique_points"] == 1
        assert info["tool_calls_total"] == 1 and info["turns_used"] == 1  # a seen call, not a turn
        assert answer.reward == pytest.approx(0.6 + 0.4)


def test_only_distinct_zooms_earn_the_bonus() -> None:
    """ViGoRL's multi-turn rule (``point_in_bbox_multicrop.py``): format 1 + 0.2 per unique tool-call
    coordinate beyond the first.  Two zooms 20 px apart earn 1.2; a second place written only in
    ``<think>`` earns nothing.  Without the call turns the env would count no zoom at all."""
    info = episode(SEED)
    x, y = info["target_point"]
    far = (x + 20, y) if x < 14 else (x - 20, y)
    answer = f"<think>Not at ({far[0]}, {far[1]}).</think><answer>{info['answer']}</answer>"
    two_zooms = [call_turn(*far), call_turn(x, y), f"<think>Read it.</think><answer>{info['answer']}</answer>"]
    for responses, zooms, term in (([call_turn(x, y), answer], 1, 1.0), (two_zooms, 2, 1.2)):
        backend = vista_rl.make_model("scripted", responses=responses, per_turn=True)
        (trajectory,) = run(backend, [SEED])
        final = trajectory.turns[-1].info
        assert trajectory.success and final["grounded"] is True
        assert final["unique_points"] == zooms and final["coordinate_term"] == pytest.approx(term)
        assert trajectory.turns[-1].reward == pytest.approx(0.6 + 0.4 * term)


def test_observing_is_not_a_turn_or_an_attempt() -> None:
    env = vista_rl.make_env(ENV, execute_tools=True)
    _, info = env.reset(seed=SEED)
    x, y = info["target_point"]
    record = ToolCallRecord("search_coordinate", {"coordinate": [x, y]}, "zoomed", 1)
    unknown = ToolCallRecord("crop_zoom", {"coordinate": [1, 1]}, "Error: unknown tool", 0, True)
    env.observe_tool_turn(call_turn(x, y), [record, unknown])
    assert (env.turns, env.attempts, env.done) == (0, 0, False)
    assert env.tool_calls == [{"name": "search_coordinate", "arguments": {"coordinate": [x, y]}}]
    assert env.cited_points() == [(x, y), (x, y)]


def test_old_reward_mode_values_move_to_grounding_reward_with_a_warning() -> None:
    with pytest.warns(FutureWarning, match="use grounding_reward: single_turn"):
        env = vista_rl.make_env(ENV, reward_mode="single_turn")
    config = env.config
    assert (config.grounding_reward, config.reward_mode) == ("single_turn", "last")
    assert (config.correct_reward, config.coordinate_reward) == (0.5, 0.5)
    with pytest.raises(ValueError, match="give only grounding_reward"):
        vista_rl.make_env(ENV, reward_mode="multi_turn", grounding_reward="multi_turn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vista_rl.make_env(ENV, grounding_reward="single_turn").config.reward_mode == "last"


@pytest.mark.parametrize(("reward_mode", "accuracy"), [("first", 0.0), ("decayed", 0.5), ("last", 1.0)])
def test_answer_attempt_reward_mode_works_on_grounded_envs(reward_mode: str, accuracy: float) -> None:
    env = vista_rl.make_env(ENV, tools=[], answer_attempts=2, reward_mode=reward_mode, decay=0.5)
    _, info = env.reset(seed=SEED)
    wrong = next(colour for colour in env.config.colours if colour != info["answer"])
    think = f"<think>The frame is at {tuple(info['target_point'])}.</think>"
    assert not env.step(f"{think}<answer>{wrong}</answer>").done
    result = env.step(f"{think}<answer>{info['answer']}</answer>")
    assert result.info["success"] and result.reward == pytest.approx(0.6 * accuracy + 0.4)

"""Rewards a policy cannot farm with spammed tool calls (issue 33, item 1).

The attack that motivated these: one turn of 40 zoom calls at made-up, off-image coordinates, run by
the rollout engine (which caps calls per turn and returns the rest as errors) and shown to the env
with ``observe_tool_turn``, scored 4.12 on the grounded env against 1.16 for 3 honest calls: errored
calls, calls past the image budget and off-image points all counted toward ViGoRL's multi-turn bonus.
Each test here fails on that rule.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from vista_plugin_judges.points import unique_points

import vista_rl
from vista_rl import ToolCallRecord
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs

ENV = "grounding/zoom-spot-v0"
SEED = 3
MULTI_TURN = {"grounding_reward": "multi_turn"}


def zoom_turn(points: list[tuple[float, float]]) -> str:
    calls = "".join(f"<tool_call>{json.dumps({'name': 'search_coordinate', 'arguments': {'coordinate': list(p)}})}"
                    "</tool_call>" for p in points)
    return f"<think>Looking around.</think>{calls}"


def reset(**config: object) -> tuple[vista_rl.Env, dict]:
    env = vista_rl.make_env(ENV, **{**MULTI_TURN, **config})
    _, info = env.reset(seed=SEED)
    return env, info


def answer(env: vista_rl.Env, info: dict) -> vista_rl.StepResult:
    return env.step(f"<think>Read it.</think><answer>{info['answer']}</answer>")


def test_forty_spammed_zooms_through_the_engine_never_beat_one_honest_zoom() -> None:
    """The engine path, as in training: 40 calls in one turn (off-image and on-image, all distinct),
    then the right answer.  The oracle's one zoom scores 0.6 + 0.4; the spam may not score more."""
    _, info = reset()
    x, y = info["target_point"]
    spam = [(1000 + 15 * i, -500 - 15 * i) for i in range(30)] + [(2 + 12 * (i % 3), 2 + 12 * (i // 3)) for i in range(9)]
    responses = [zoom_turn([(x, y), *spam]), f"<think>Read it.</think><answer>{info['answer']}</answer>"]
    backend = vista_rl.make_model("scripted", responses=responses, per_turn=True)
    with RolloutEngine(backend, RolloutSection(max_turns=3)) as engine:
        (trajectory,) = engine.run(episode_specs(ENV, [SEED], env_config=MULTI_TURN))
    assert trajectory.success, trajectory.failure
    assert sum(call.error for call in trajectory.turns[0].tool_calls) > 0  # the engine refused some
    final = trajectory.turns[-1]
    assert final.reward <= 0.6 + 0.4 + 1e-9
    assert final.info["tool_calls_total"] <= env_budget()


def env_budget() -> int:
    env = vista_rl.make_env(ENV, **MULTI_TURN)
    return env.config.max_images - 1


def test_errored_calls_do_not_count() -> None:
    env, info = reset()
    x, y = info["target_point"]
    failed = [ToolCallRecord("search_coordinate", {"coordinate": [x + dx, y]}, "Error: too many calls", 0, True)
              for dx in (-12, 12)]
    env.observe_tool_turn(zoom_turn([(x, y)]), [ToolCallRecord("search_coordinate", {"coordinate": [x, y]},
                                                               "zoomed", 1), *failed])
    result = answer(env, info)
    assert result.info["unique_points"] == 1 and result.reward == pytest.approx(0.6 + 0.4)


def test_calls_past_the_image_budget_do_not_count() -> None:
    """``step`` refuses calls past ``max_images``; observing the same calls must not count them."""
    env, info = reset(max_images=2)  # one zoom beside the shown image
    calls = [ToolCallRecord("search_coordinate", {"coordinate": [4 + 11 * i, 4 + 11 * i]}, "zoomed", 1)
             for i in range(3)]
    env.observe_tool_turn(zoom_turn([]), calls)
    assert len(env.tool_calls) == 1
    assert answer(env, info).info["unique_points"] == 1


def test_off_image_and_other_image_points_earn_nothing() -> None:
    env, info = reset()
    width, height = env.problem.images[0].size
    off = [(-1, 5), (width, 5), (5, height), (float("nan"), 3), (5, 5e300)]
    calls = [ToolCallRecord("search_coordinate", {"coordinate": list(p)}, "zoomed", 1) for p in off[:1]]
    calls.append(ToolCallRecord("search_coordinate", {"coordinate": [20, 20], "image": 1}, "zoomed", 1))
    env.observe_tool_turn(zoom_turn([]), calls)
    assert env.call_coordinates() == []
    env.tool_calls = [{"name": "search_coordinate", "arguments": {"coordinate": list(p)}} for p in off]
    assert env.call_coordinates() == []


def test_the_bonus_is_capped_even_with_a_large_budget() -> None:
    """ViGoRL's turn limit bounds its bonus; ``bonus_points`` (4, as vigorl/multiturn) bounds ours."""
    env, info = reset(display_size=280, max_images=64, max_turns=50)
    calls = [ToolCallRecord("search_coordinate", {"coordinate": [5 + 20 * i, 5 + 20 * j]}, "zoomed", 1)
             for i in range(7) for j in range(7)]
    env.observe_tool_turn(zoom_turn([]), calls)
    result = answer(env, info)
    assert result.info["unique_points"] == 49
    assert result.info["coordinate_term"] == pytest.approx(1.0 + 0.2 * 3)
    assert result.reward <= 0.6 + 0.4 * 1.6 + 1e-9


def pairwise_unique(points: list[tuple[float, float]], distance: float) -> list[tuple[float, float]]:
    """The quadratic greedy scan the grid replaced (the definition)."""
    kept: list[tuple[float, float]] = []
    for x, y in points:
        if all(math.hypot(x - kx, y - ky) >= distance for kx, ky in kept):
            kept.append((x, y))
    return kept


@pytest.mark.parametrize("distance", [0.5, 10.0, 37.0])
def test_grid_unique_points_equal_the_pairwise_definition(distance: float) -> None:
    rng = random.Random(int(distance * 10))
    for _ in range(30):
        points = [(rng.uniform(-60, 60), rng.uniform(-60, 60)) for _ in range(rng.randint(0, 120))]
        points += [(round(x), round(y)) for x, y in points[:20]]  # exact and near repeats
        assert unique_points(points, distance) == pairwise_unique(points, distance)


def test_unique_points_skips_what_names_no_place() -> None:
    assert unique_points([(float("nan"), 1), (float("inf"), 2), (1e300, 3), (4, 4)]) == [(4.0, 4.0)]
    with pytest.raises(ValueError):
        unique_points([(1, 1)], 0)

"""Behaviour of the count-objects envs: the picture holds exactly the answer, the oracle wins, retries
and feedback work, bad input is feedback."""

from __future__ import annotations

import hashlib
from collections import deque

import numpy as np
import pytest
import vista_rl
from vista_rl_sdk.checks import ADVERSARIAL_ACTIONS

from vista_plugin_count_objects.env import read_count

ENV_ID = "count-objects/count-objects-v0"
CIRCLES_ID = "count-objects/count-circles-v0"
BACKGROUND = (250, 250, 250)


def blobs(image) -> int:
    """Connected (8-neighbour) non-background regions: an independent count of what was drawn."""
    foreground = np.any(np.abs(np.asarray(image).astype(int) - BACKGROUND) > 30, axis=-1)
    seen = np.zeros_like(foreground)
    height, width = foreground.shape
    regions = 0
    for y, x in zip(*np.nonzero(foreground), strict=True):
        if seen[y, x]:
            continue
        regions += 1
        seen[y, x] = True
        queue = deque([(y, x)])
        while queue:
            cy, cx = queue.popleft()
            for ny in range(max(cy - 1, 0), min(cy + 2, height)):
                for nx in range(max(cx - 1, 0), min(cx + 2, width)):
                    if foreground[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        queue.append((ny, nx))
    return regions


@pytest.mark.parametrize("seed", range(12))
def test_the_picture_holds_exactly_the_answer(seed: int) -> None:
    observation, info = vista_rl.make_env(ENV_ID, max_objects=12).reset(seed=seed)
    assert blobs(observation.images[0]) == info["answer"]


def test_counts_cover_the_configured_range() -> None:
    env = vista_rl.make_env(ENV_ID, min_objects=3, max_objects=5)
    answers = {env.reset(seed=seed)[1]["answer"] for seed in range(60)}
    assert answers == {3, 4, 5}


@pytest.mark.parametrize("env_id", [ENV_ID, CIRCLES_ID])
@pytest.mark.parametrize("prompt_format", ["free_think", "no_think"])
def test_oracle_always_succeeds(env_id: str, prompt_format: str) -> None:
    env = vista_rl.make_env(env_id, prompt_format=prompt_format)
    for seed in range(10):
        env.reset(seed=seed)
        result = env.step(env.oracle_response() or "")
        assert result.info["success"] and result.reward == 1.0 and result.terminated


def test_distractors_are_drawn_but_not_counted() -> None:
    observation, info = vista_rl.make_env(CIRCLES_ID, distractors=4).reset(seed=3)
    assert blobs(observation.images[0]) == info["answer"] + 4
    assert "circles" in observation.text


def test_wrong_answer_gets_feedback_and_a_retry_then_the_episode_ends() -> None:
    env = vista_rl.make_env(ENV_ID, max_attempts=2, attempt_penalty=0.25)
    _, info = env.reset(seed=5)
    first = env.step(f"<think>guess</think><answer>{info['answer'] + 1}</answer>")
    assert not first.terminated and first.reward == 0.0 and first.info["abs_error"] == 1
    assert "1 attempt left" in first.observation.text
    second = env.step(env.oracle_response() or "")
    assert second.terminated and second.info["success"] and second.reward == pytest.approx(0.75)
    assert second.info["attempts"] == 2


def test_last_wrong_answer_reveals_the_count() -> None:
    env = vista_rl.make_env(ENV_ID)
    _, info = env.reset(seed=1)
    result = env.step(f"<think>x</think><answer>{info['answer'] + 2}</answer>")
    assert result.terminated and not result.info["success"]
    assert f"The answer was {info['answer']}" in result.observation.text


@pytest.mark.parametrize(("text", "expected"), [("7", 7), ("7 objects", 7), ("seven", 7), (" Three ", 3),
                                                ("none", None), ("", None), (None, None), ("9" * 5000, None)])
def test_read_count(text: str | None, expected: int | None) -> None:
    assert read_count(text) == expected


def test_malformed_answers_are_feedback() -> None:
    env = vista_rl.make_env(ENV_ID)
    env.reset(seed=0)
    result = env.step("<answer>lots")
    assert not result.info["success"] and not result.info["action_valid"] and result.observation.text




@pytest.mark.parametrize("env_id", [ENV_ID, CIRCLES_ID])
@pytest.mark.parametrize("action", ADVERSARIAL_ACTIONS.values(), ids=ADVERSARIAL_ACTIONS.keys())
def test_adversarial_actions_are_feedback_not_exceptions(env_id: str, action: str) -> None:
    env = vista_rl.make_env(env_id)
    env.reset(seed=0)
    result = env.step(action)
    assert result.reward == 0.0 and not result.info["success"] and not result.info["action_valid"]
    assert result.info["format_ok"] is ("<answer>" + "7" in action)  # only the huge answer is well formed
    assert result.observation.text.startswith(
        "Your answer must be a whole number" if result.info["format_ok"] else "Invalid response format")


def test_pixels_of_a_fixed_seed_are_pinned() -> None:
    observation, _ = vista_rl.make_env(ENV_ID).reset(seed=7)
    again, _ = vista_rl.make_env(ENV_ID).reset(seed=7)
    other, _ = vista_rl.make_env(ENV_ID).reset(seed=8)
    digest = hashlib.sha256(observation.images[0].tobytes()).hexdigest()
    assert hashlib.sha256(again.images[0].tobytes()).hexdigest() == digest
    assert hashlib.sha256(other.images[0].tobytes()).hexdigest() != digest


@pytest.mark.parametrize(("config", "key"), [({"max_objects": 99}, "max_objects"),
                                             ({"min_objects": 5, "max_objects": 2}, "min_objects"),
                                             ({"target_shape": "star"}, "target_shape")])
def test_bad_config_names_the_key(config: dict, key: str) -> None:
    with pytest.raises(Exception, match=key):
        vista_rl.make_env(ENV_ID, **config)

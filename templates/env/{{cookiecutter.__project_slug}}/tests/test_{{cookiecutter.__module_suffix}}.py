"""Behaviour of the example env: the oracle wins, a wrong answer loses, bad input is feedback.

These test the template's example env: replace them with tests of yours when you replace the
example (they fail against anything else).  tests/test_*_conformance.py needs no change: it checks
whatever the plugin registers.
"""

from __future__ import annotations

import pytest
import vista_rl

ENV_ID = "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}-v0"


@pytest.mark.parametrize("prompt_format", ["free_think", "no_think"])
def test_oracle_always_succeeds(prompt_format: str) -> None:
    env = vista_rl.make_env(ENV_ID, prompt_format=prompt_format)
    for seed in range(10):
        env.reset(seed=seed)
        result = env.step(env.oracle_response() or "")
        assert result.info["success"] and result.reward == 1.0 and result.terminated


def test_wrong_colour_scores_zero() -> None:
    env = vista_rl.make_env(ENV_ID)
    _, info = env.reset(seed=4)
    wrong = "red" if info["answer"] != "red" else "blue"
    result = env.step(f"<think>guess</think><answer>{wrong}</answer>")
    assert not result.info["success"] and result.info["action_valid"] and result.reward == 0.0


def test_malformed_answer_is_feedback_not_an_exception() -> None:
    env = vista_rl.make_env(ENV_ID)
    env.reset(seed=0)
    result = env.step("<answer>teal")
    assert not result.info["success"] and result.observation.text


def test_seeds_differ_and_repeat() -> None:
    first, _ = vista_rl.make_env(ENV_ID).reset(seed=1)
    again, _ = vista_rl.make_env(ENV_ID).reset(seed=1)
    other, _ = vista_rl.make_env(ENV_ID).reset(seed=2)
    assert first.images[0].tobytes() == again.images[0].tobytes()
    assert first.images[0].tobytes() != other.images[0].tobytes()


def test_bad_config_names_the_key() -> None:
    with pytest.raises(Exception, match="distractors"):
        vista_rl.make_env(ENV_ID, distractors=99)

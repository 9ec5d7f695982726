import hashlib

import pytest

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.checks import ADVERSARIAL_ACTIONS

ENV_ID = "oddshape/odd-colour-v0"


@pytest.mark.parametrize("prompt_format", ["free_think", "no_think"])
def test_conformance(prompt_format):
    check_env(ENV_ID, {"prompt_format": prompt_format})


def test_discovered_through_entry_point():
    spec = vista_rl.host().spec("envs", ENV_ID)
    assert spec.distribution == "vista-plugin-oddshape"
    assert spec.version == "0.1.0"


def test_oracle_solves_and_wrong_answer_fails():
    env = vista_rl.make_env(ENV_ID)
    for seed in range(10):
        env.reset(seed=seed)
        result = env.step(env.oracle_response())
        assert result.info["success"] and result.reward == 1.0 and result.terminated
    observation, info = env.reset(seed=3)
    wrong = 1 if info["answer"] != 1 else 2
    result = env.step(f"<think>x</think><answer>{wrong}</answer>")
    assert not result.info["success"] and result.reward == 0.0


def test_pixels_of_a_fixed_seed_are_stable():
    observation, info = vista_rl.make_env(ENV_ID).reset(seed=7)
    digest = hashlib.sha256(observation.images[0].tobytes()).hexdigest()
    again, _ = vista_rl.make_env(ENV_ID).reset(seed=7)
    assert hashlib.sha256(again.images[0].tobytes()).hexdigest() == digest
    other, _ = vista_rl.make_env(ENV_ID).reset(seed=8)
    assert hashlib.sha256(other.images[0].tobytes()).hexdigest() != digest


def test_malformed_answers_are_feedback():
    env = vista_rl.make_env(ENV_ID)
    env.reset(seed=0)
    result = env.step("<answer>seven")
    assert not result.info["success"]
    assert "1 to 9" in result.observation.text or "format" in result.observation.text.lower()




@pytest.mark.parametrize("action", ADVERSARIAL_ACTIONS.values(), ids=ADVERSARIAL_ACTIONS.keys())
def test_adversarial_actions_are_feedback_not_exceptions(action):
    env = vista_rl.make_env(ENV_ID, format_reward=0.5)
    env.reset(seed=0)
    result = env.step(action)
    well_formed = action.startswith("<think>x</think><answer>7")  # only the huge answer has the right tags
    assert result.terminated and not result.info["success"] and not result.info["action_valid"]
    assert result.info["format_ok"] is well_formed and result.reward == (0.5 if well_formed else 0.0)
    assert result.observation.text.startswith("Your answer must be" if well_formed else "Invalid response format")


def test_bad_config_names_the_key():
    with pytest.raises(Exception, match="grid"):
        vista_rl.make_env(ENV_ID, grid=99)

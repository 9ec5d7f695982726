import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from hypothesis import HealthCheck, given, settings
from PIL import Image
from pydantic import ValidationError
from vista_plugin_gamekit.expert import generate_expert_trajectories
from vista_plugin_gamekit.formats import PROMPT_FORMATS
from vista_plugin_gymnasium.to_gymnasium import VistaGymEnv

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.game_testing import episode_fingerprint, fingerprint_in_subprocess, model_outputs

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("env_id", ["gymnasium/FrozenLake-v1", "gymnasium/CliffWalking-v1"])
@pytest.mark.parametrize("render_mode", ["vision", "text", "both"])
def test_check_env_on_wrapped_toy_text(env_id, render_mode):
    check_env(env_id, {"render_mode": render_mode}, cross_process=render_mode == "both")


@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_every_prompt_format_is_solved_by_the_oracle(prompt_format):
    for env_id in ("gymnasium/FrozenLake-v1", "gymnasium/CliffWalking-v1"):
        trajectories = list(generate_expert_trajectories(env_id, [0], prompt_format=prompt_format,
                                                         render_mode="text"))
        assert len(trajectories) == 1 and trajectories[0].success


def test_cliffwalking_oracle_takes_the_shortest_path_and_rewards_pass_through():
    env = vista_rl.make_env("gymnasium/CliffWalking-v1", prompt_format="no_think", max_actions_per_step=20)
    env.reset(seed=0)
    response = env.oracle_response()
    assert response == "<answer>Up," + "Right," * 11 + "Down</answer>"  # 13 moves around the cliff
    result = env.step(response)
    assert result.info["success"] and result.terminated and result.reward == pytest.approx(-13.0)


def test_action_names_map_to_discrete_actions():
    env = vista_rl.make_env("gymnasium/FrozenLake-v1", render_mode="text", prompt_format="no_think")
    env.reset(seed=0)
    assert env.action_names == ("Left", "Down", "Right", "Up")
    result = env.step("<answer>down, RIGHT</answer>")  # case does not matter
    assert result.info["actions"] == ["Down", "Right"] and result.info["state"]["player"] == [1, 1]
    assert result.terminated and not result.info["success"]  # (1,1) is a hole in the 4x4 map
    text_env = vista_rl.make_env("gymnasium/FrozenLake-v1", render_mode="text")
    observation, _ = text_env.reset(seed=0)
    assert "PFFF" in observation.text and "\x1b" not in observation.text


def test_generic_factory_and_its_errors():
    env = vista_rl.make_env("gymnasium/make-v0", gym_id="Taxi-v4", render_mode="text", prompt_format="no_think")
    observation, _ = env.reset(seed=1)
    assert env.action_names[:2] == ("South", "North") and "Taxi-v4" in env.system_prompt()
    assert env.oracle_response() is not None  # BFS over Taxi's transition table
    named = vista_rl.make_env("gymnasium/make-v0", gym_id="FrozenLake-v1", render_mode="text",
                           action_names=["W", "S", "E", "N"])
    named.reset(seed=0)
    assert named.step("<think>x</think><observation>a</observation><reasoning>b</reasoning>"
                      "<prediction>c</prediction><answer>S</answer>").info["actions"] == ["S"]
    with pytest.raises(ValueError, match="4 distinct names"):
        vista_rl.make_env("gymnasium/make-v0", gym_id="FrozenLake-v1", action_names=["a", "b"])
    with pytest.raises(ValueError, match="only Discrete"):
        vista_rl.make_env("gymnasium/make-v0", gym_id="Pendulum-v1", render_mode="vision")
    with pytest.raises(ValidationError, match="gym_id"):
        vista_rl.make_env("gymnasium/make-v0")


def test_wrapped_env_is_deterministic_across_processes():
    config = {"render_mode": "both", "gym_kwargs": {"is_slippery": True}}
    responses = ["<answer>Down,Right</answer>", "oracle", "oracle", "<answer>Right</answer>"]
    local = episode_fingerprint("gymnasium/FrozenLake-v1", config, 3, responses)
    assert fingerprint_in_subprocess("gymnasium/FrozenLake-v1", config, 3, responses) == local


@pytest.mark.parametrize("env_id", ["sokoban/sokoban-v0", "frozenlake/frozenlake-v0"])
def test_vista_envs_pass_gymnasiums_own_checker(env_id):
    env = VistaGymEnv(env_id, render_mode="rgb_array", prompt_format="no_think")
    gymnasium_check_env(env, skip_render_check=False)
    observation, info = env.reset(seed=4)
    assert env.observation_space.contains(observation)
    assert np.array_equal(env.render(), observation["images"][0])
    inner = env.env
    _, reward, terminated, truncated, info = env.step(inner.oracle_response())
    assert info["action_valid"] and isinstance(reward, float)
    env.close()


def test_vista_env_through_gymnasium_wrappers():
    env = gymnasium.wrappers.RecordEpisodeStatistics(VistaGymEnv("frozenlake/frozenlake-v0", render_mode="ansi"))
    observation, _ = env.reset(seed=2)
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(env.unwrapped.env.oracle_response())
        done = terminated or truncated
    assert info["success"] and info["episode"]["r"] >= 10
    assert "[Initial" not in env.render() and "<image>" in env.render()


_FUZZ_ENV = vista_rl.make_env("gymnasium/CliffWalking-v1", render_mode="text", prompt_format="free_think")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=model_outputs(("Up", "Right", "Down", "Left")))
def test_any_string_gives_a_valid_step_result(text):
    _FUZZ_ENV.reset(seed=0)
    result = _FUZZ_ENV.step(text)
    assert isinstance(result, vista_rl.StepResult) and not result.observation.images
    assert isinstance(result.info["action_valid"], bool) and len(result.info["actions"]) <= 3


def _success_rate(env, seeds, choose):
    """Run ``choose(env) -> response`` until each seeded episode ends; the fraction that succeeded."""
    wins = 0
    for seed in seeds:
        env.reset(seed=seed)
        while True:
            result = env.step(choose(env))
            if result.terminated or result.truncated:
                break
        wins += bool(result.info["success"])
    return wins / len(seeds)


def test_the_oracle_plans_on_slippery_ice_by_its_transition_probabilities():
    """Issue 23: the oracle planned as if the ice were solid (0 of 6 on slippery FrozenLake-v1)."""
    env = vista_rl.make_env("gymnasium/FrozenLake-v1", render_mode="text", prompt_format="no_think",
                            gym_kwargs={"is_slippery": True})
    assert env.oracle_kind.startswith("value iteration")
    seeds = range(50)
    oracle = _success_rate(env, seeds, lambda e: e.oracle_response())
    optimum = env._policy.success_probability(0, 100)  # value iteration's chance from the start, 100 steps
    assert optimum == pytest.approx(0.744, abs=0.005)  # the known optimum of the 4x4 slippery map

    def solid_ice(e):  # the old planner: a shortest path over the most likely outcome of each action
        return "<answer>" + e.action_names[e._shortest_path(int(e._obs))[0]] + "</answer>"

    solid = _success_rate(env, seeds, solid_ice)
    assert oracle >= optimum - 0.12 and oracle > solid + 0.4, (oracle, solid, optimum)


def test_slippery_8x8_by_default_gets_one_planned_action_per_turn():
    env = vista_rl.make_env("gymnasium/make-v0", gym_id="FrozenLake8x8-v1", render_mode="text",
                            prompt_format="no_think", max_actions_per_step=3)
    env.reset(seed=0)
    assert env.oracle_kind.startswith("value iteration")
    assert len(env.oracle_actions()) == 1  # the next action depends on where the ice takes you
    assert env._policy.success_probability(0, 100) > 0.5


def test_an_env_without_a_transition_table_says_it_has_no_exact_oracle():
    env = vista_rl.make_env("gymnasium/make-v0", gym_id="CartPole-v1", render_mode="vision", prompt_format="no_think")
    env.reset(seed=0)
    assert env.oracle_kind.startswith("none") and "no exact oracle" in env.oracle_kind
    assert env.oracle_response() is None
    env.close()


def _make_sokoban():
    return VistaGymEnv("sokoban/sokoban-v0", render_mode="rgb_array", prompt_format="no_think")


def test_vista_env_in_async_vector_env_with_its_defaults():
    """Issue 27: shared memory (the default) refused ``Sequence(Box)``; gymnasium's Text cannot hold '<'."""
    vector = gymnasium.vector.AsyncVectorEnv([_make_sokoban, _make_sokoban])
    try:
        observations, _ = vector.reset(seed=[3, 4])
        single = _make_sokoban()
        expected, _ = single.reset(seed=4)
        assert observations["images"].shape == (2, 1, *single.image_shape)
        assert np.array_equal(observations["images"][1], expected["images"]) and observations["text"][1] == expected["text"]
        observations, rewards, *_ = vector.step(("<answer>Up</answer>", "<answer>Left</answer>"))
        stepped = single.step("<answer>Left</answer>")[0]
        assert observations["text"][1] == stepped["text"] and "\n" in observations["text"][1]
        assert observations["text"][1] != expected["text"] and list(observations["image_count"]) == [1, 1]
        single.close()
    finally:
        vector.close()


class _Zoomer(vista_rl.Env):
    """Shows a 512-pixel image, then (as a zoom tool's result) a 672-pixel one, then three images."""

    def reset(self, seed=None):
        self.turn = 0
        return vista_rl.Observation("<image>", [Image.new("RGB", (512, 512), "red")]), {}

    def step(self, action):
        self.turn += 1
        images = [Image.new("RGB", (672, 336), "blue")] * (1 if self.turn == 1 else 3)
        return vista_rl.StepResult(vista_rl.Observation("<image>" * len(images), images), 0.0, False, False, {})


def test_images_of_another_size_stay_inside_the_declared_space_and_too_many_is_a_clear_error():
    env = VistaGymEnv(_Zoomer())
    assert env.observation_space["images"].shape == (1, 512, 512, 3)
    env.reset(seed=0)
    observation, *_ = env.step("zoom")
    assert env.observation_space.contains(observation)
    zoom = observation["images"][0]
    assert (zoom[256, 256] == [0, 0, 255]).all() and (zoom[10, 256] == 0).all()  # scaled to 512x256, centred
    with pytest.raises(ValueError, match="max_images=1"):
        env.step("zoom again")
    roomy = VistaGymEnv(_Zoomer(), max_images=3, image_shape=(64, 64, 3))
    roomy.reset(seed=0)
    roomy.step("zoom")
    observation, *_ = roomy.step("zoom again")
    assert observation["image_count"] == 3 and roomy.observation_space.contains(observation)


@pytest.mark.parametrize(("env_id", "config", "idle"), [
    ("gymnasium/CliffWalking-v1", {}, -100.0),  # the cliff's cost: idling is never cheaper than walking
    ("gymnasium/FrozenLake-v1", {}, 0.0),  # no step costs anything
    ("gymnasium/CliffWalking-v1", {"idle_reward": -2.5}, -2.5),
])
def test_a_reply_that_takes_no_action_costs_what_the_worst_step_costs(env_id, config, idle):
    """``vista audit rewards`` found empty replies (0 each) beating CliffWalking's walk to the goal (-13)."""
    env = vista_rl.make_env(env_id, prompt_format="no_think", **config)
    env.reset(seed=0)
    for reply in ("", "<answer>Fly</answer>", "no tags at all"):
        result = env.step(reply)
        assert result.reward == idle and not result.info["action_valid"]

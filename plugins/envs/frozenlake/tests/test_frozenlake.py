import hashlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError
from vista_plugin_frozenlake.lake import (
    ACTION_NAMES,
    GenerationError,
    distances_to_goal,
    generate_map,
    neighbour,
)
from vista_plugin_gamekit.expert import generate_expert_trajectories
from vista_plugin_gamekit.formats import PROMPT_FORMATS

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.game_testing import (
    assert_incremental_frames_match,
    episode_fingerprint,
    fingerprint_in_subprocess,
    model_outputs,
    play_oracle_checked,
)

ENV_ID = "frozenlake/frozenlake-v0"
GYM_4X4 = ["SFFF", "FHFH", "FFFH", "HFFG"]  # gymnasium's default 4x4 map; shortest path 6 moves


@pytest.mark.parametrize("render_mode", ["vision", "text", "both"])
@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_check_env_every_mode_and_format(render_mode, prompt_format):
    cross = prompt_format == "grounding_worldmodeling"
    check_env(ENV_ID, {"render_mode": render_mode, "prompt_format": prompt_format}, cross_process=cross)


def test_slippery_preset_passes_check_env_and_is_registered():
    check_env("frozenlake/frozenlake-slippery-v0", cross_process=False)
    assert vista_rl.host().spec("envs", ENV_ID).distribution == "vista-plugin-frozenlake"


def test_determinism_across_processes_including_slips():
    responses = ["<answer>Down,Right,Up</answer>", "oracle", "<answer>Left,Left,Down</answer>", "oracle",
                 "nonsense"]
    for config in ({"is_slippery": True, "size": 6}, {"render_mode": "both"}):
        local = episode_fingerprint(ENV_ID, config, 5, responses)
        assert fingerprint_in_subprocess(ENV_ID, config, 5, responses) == local
        assert episode_fingerprint(ENV_ID, config, 6, responses) != local


@pytest.mark.parametrize("config", [{"prompt_format": "no_think"}, {"is_slippery": True, "size": 6}])
def test_incremental_frames_equal_full_redraws(config):
    env = vista_rl.make_env(ENV_ID, render_mode="both", max_actions_per_step=1, tile_size=8, **config)
    assert_incremental_frames_match(env, ACTION_NAMES, seed=2)


def test_pixels_of_a_fixed_seed_are_pinned():
    observation, _ = vista_rl.make_env(ENV_ID).reset(seed=7)
    image = observation.images[0]
    assert image.size == (256, 256)
    assert hashlib.sha256(image.tobytes()).hexdigest() == "3ff8517b8acdcb18b3dd2bf1c5d8fa46377ef2340dd0af389735b19d699f8857"
    other, _ = vista_rl.make_env(ENV_ID).reset(seed=8)
    assert other.images[0].tobytes() != image.tobytes()


def test_a_fractional_seed_is_an_error_not_another_episode():
    env = vista_rl.make_env(ENV_ID)
    with pytest.raises(ValueError, match="seed must be a whole number, got 1.5"):
        env.reset(seed=1.5)  # int(1.5) used to play seed 1 without a word
    assert env.reset(seed=1.0)[1]["seed"] == 1


def test_generated_maps_have_a_path_random_ends_and_respect_the_range():
    starts, goals = set(), set()
    for seed in range(200):
        lake = generate_map(random.Random(seed), 5, 0.7, min_solution_steps=3, max_solution_steps=6)
        assert lake.start != lake.goal and lake.start not in lake.holes and lake.goal not in lake.holes
        assert 3 <= lake.distance[lake.start] <= 6
        assert lake.distance == distances_to_goal(lake.size, lake.holes, lake.goal)
        starts.add(lake.start)
        goals.add(lake.goal)
    assert len(starts) > 10 and len(goals) > 10
    holes = sum(len(generate_map(random.Random(s), 8, 0.8).holes) for s in range(100)) / (100 * 64)
    assert 0.1 < holes < 0.25  # about 1 - p, a little less since start/goal are kept frozen
    with pytest.raises(GenerationError, match="raise p"):
        generate_map(random.Random(0), 4, 0.05, min_solution_steps=6, max_tries=20)


def test_reward_sums_of_scripted_episodes():
    env = vista_rl.make_env(ENV_ID, desc=GYM_4X4, prompt_format="no_think", render_mode="text")
    env.reset(seed=0)
    edge = env.step("<answer>Up</answer>")  # off the edge: stays, valid but not effective
    assert edge.reward == pytest.approx(0.5) and not edge.info["action_effective"]
    path = env.step("<answer>Down,Down,Right</answer>")
    assert path.reward == pytest.approx(0.5) and path.info["state"]["player"] == [2, 1]
    finish = env.step("<answer>Right,Down,Right</answer>")
    assert finish.terminated and finish.info["success"] and finish.reward == pytest.approx(10.5)
    assert edge.reward + path.reward + finish.reward == pytest.approx(11.5)
    assert "√" in finish.observation.text

    env.reset(seed=0)
    hole = env.step("<answer>Down,Right,Right</answer>")  # (1,1) is a hole: the turn stops there
    assert hole.terminated and not hole.info["success"] and hole.info["actions"] == ["Down", "Right"]
    assert hole.reward == pytest.approx(0.5) and "X" in hole.observation.text


def test_slips_follow_the_seed_and_the_rate():
    env = vista_rl.make_env(ENV_ID, desc=["SFFF", "FFFF", "FFFF", "FFFG"], is_slippery=True,
                         prompt_format="no_think", render_mode="text")
    landed = []
    for seed in range(600):
        env.reset(seed=seed)
        landed.append(tuple(env.step("<answer>Right</answer>").info["state"]["player"]))
    assert set(landed) == {(0, 1), (0, 0), (1, 0)}  # intended, or sideways: Up (edge) / Down
    assert 0.58 < sum(cell != (0, 1) for cell in landed) / 600 < 0.75  # slip_prob = 2/3
    env.reset(seed=17)
    again = env.step("<answer>Right</answer>").info["state"]["player"]
    assert tuple(again) == landed[17]


@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_oracle_responses_are_well_formed_and_predictions_true(prompt_format):
    env = vista_rl.make_env(ENV_ID, prompt_format=prompt_format, size=6)
    for seed in range(6):
        assert play_oracle_checked(env, seed).info["success"]


def test_expert_trajectories_replay_to_success():
    trajectories = list(generate_expert_trajectories(ENV_ID, range(10), size=5))
    assert len(trajectories) == 10
    env = vista_rl.make_env(ENV_ID, size=5)
    for trajectory in trajectories:
        env.reset(seed=trajectory.seed)
        results = [env.step(turn.response) for turn in trajectory.turns]
        assert results[-1].info["success"] and [r.reward for r in results] == [t.reward for t in trajectory.turns]
    slippery = list(generate_expert_trajectories("frozenlake/frozenlake-slippery-v0", range(10), max_turns=60,
                                                 only_successful=False))
    assert all(len(turn.info["actions"]) == 1 for t in slippery for turn in t.turns)
    assert any(t.success for t in slippery)


def test_state_and_relations_in_info():
    env = vista_rl.make_env(ENV_ID, desc=GYM_4X4, prompt_format="no_think")
    _, info = env.reset(seed=0)
    assert info["state"]["player"] == [0, 0] and info["state"]["goal"] == [3, 3]
    assert {"object_id": "target", "vertical_relation": "below", "horizontal_relation": "right"} in info["relations"]
    result = env.step("<answer>Down</answer>")
    assert result.info["state_before"]["player"] == [0, 0] and result.info["state"]["player"] == [1, 0]
    assert result.info["prediction_state"] == result.info["relations"]


def test_config_errors_name_the_key():
    with pytest.raises(ValidationError, match="size"):
        vista_rl.make_env(ENV_ID, size=1)
    with pytest.raises(ValidationError, match="desc"):
        vista_rl.make_env(ENV_ID, desc=["SF", "FF"])


_FUZZ_ENV = vista_rl.make_env(ENV_ID, render_mode="both", prompt_format="grounding", is_slippery=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=model_outputs(ACTION_NAMES))
def test_any_string_gives_a_valid_step_result(text):
    _FUZZ_ENV.reset(seed=len(text) % 5)
    result = _FUZZ_ENV.step(text)
    assert isinstance(result, vista_rl.StepResult)
    assert result.observation.text.count("<image>") == len(result.observation.images) == 1
    assert isinstance(result.info["format_ok"], bool) and len(result.info["actions"]) <= 3


def test_brief_prompt_style_keeps_the_game_and_drops_the_prose():
    """``prompt_style: brief`` changes only the words: same maps, same rewards, same oracle, and the
    observation is the bare image (the state still reaches the model, the rules text does not)."""
    base = {"render_mode": "vision", "prompt_format": "no_think", "max_actions_per_step": 1}
    check_env(ENV_ID, {**base, "prompt_style": "brief"}, cross_process=False)
    full, brief = vista_rl.make_env(ENV_ID, **base), vista_rl.make_env(ENV_ID, **base, prompt_style="brief")
    assert len(brief.system_prompt()) < len(full.system_prompt()) / 4
    assert "Left, Down, Right, Up" in brief.system_prompt() and "<answer>" in brief.system_prompt()
    for env in (full, brief):
        env.reset(seed=11)
    obs_full, _ = full.reset(seed=11)
    obs_brief, _ = brief.reset(seed=11)
    assert obs_brief.text == "<image>" and obs_full.text != "<image>"
    assert obs_brief.images[0].tobytes() == obs_full.images[0].tobytes()
    for _ in range(6):
        answer = full.oracle_response()
        assert brief.oracle_response() == answer
        a, b = full.step(answer), brief.step(answer)
        assert (a.reward, a.terminated, a.info["success"]) == (b.reward, b.terminated, b.info["success"])
        assert b.observation.text in ("<image>", "")
        if a.terminated or a.truncated:
            break
    assert a.info["success"]


def test_flat_tiles_keep_each_cells_kind_after_shrinking_to_7_px():
    """``tile_style: flat`` paints each cell one solid colour, so a 4x4 map resized to 28x28 (the main
    job's one-vision-token view) still shows every cell's kind at its centre; the text grid agrees."""
    from PIL import Image
    from vista_plugin_frozenlake.render import FLAT_COLOURS

    env = vista_rl.make_env(ENV_ID, render_mode="both", tile_style="flat", tile_size=28, p=0.7)
    assert_incremental_frames_match(env, ACTION_NAMES, seed=4)
    observation, _ = env.reset(seed=4)
    small = observation.images[0].resize((28, 28), Image.BICUBIC)
    kinds = {"_": 0, "O": 1, "G": 2, "P": 3}
    rows = [line.split("\t") for line in env._text_grid().splitlines()]
    assert {symbol for row in rows for symbol in row} >= {"_", "O", "G", "P"}
    for r, row in enumerate(rows):
        for c, symbol in enumerate(row):
            assert small.getpixel((c * 7 + 3, r * 7 + 3)) == FLAT_COLOURS[kinds[symbol]]
    assert len(set(FLAT_COLOURS)) == len(FLAT_COLOURS)
    with pytest.raises(ValidationError, match="tile_style"):
        vista_rl.make_env(ENV_ID, tile_style="pixel-art")


def test_progress_reward_scores_each_move_by_the_distance_it_gains():
    env = vista_rl.make_env(ENV_ID, render_mode="text", prompt_format="no_think", max_actions_per_step=1,
                            random_start_goal=True, min_solution_steps=3, max_solution_steps=5, p=0.8,
                            success_reward=1.0, format_reward=0.0, progress_reward=0.25)
    for seed in range(5):
        env.reset(seed=seed)
        lake = env.lake
        distance = lake.distance[env._player]
        # the oracle's moves each gain one step of distance; the last also reaches the goal
        while True:
            result = env.step(env.oracle_response())
            now = lake.distance[env._player]
            assert now == distance - 1
            assert result.reward == pytest.approx(0.25 + (1.0 if result.terminated else 0.0))
            distance = now
            if result.terminated:
                break
    moved_away = 0
    for seed in range(20):
        env.reset(seed=seed)
        start, lake = env._player, env.lake
        away = [name for action, name in enumerate(ACTION_NAMES)
                if lake.distance[neighbour(lake.size, start, action)] == lake.distance[start] + 1]
        if away:
            assert env.step(f"<answer>{away[0]}</answer>").reward == pytest.approx(-0.25)
            moved_away += 1
    assert moved_away

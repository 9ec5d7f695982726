import hashlib
import random
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError
from vista_plugin_gamekit.expert import expert_trajectory, generate_expert_trajectories
from vista_plugin_gamekit.formats import PROMPT_FORMATS
from vista_plugin_sokoban.generate import GenerationError, generate_level
from vista_plugin_sokoban.level import ACTION_NAMES, Moved, move, parse_level
from vista_plugin_sokoban.solver import reverse_distances, solve

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.game_testing import (
    assert_incremental_frames_match,
    episode_fingerprint,
    fingerprint_in_subprocess,
    model_outputs,
    play_oracle_checked,
)

ENV_ID = "sokoban/sokoban-v0"
CORRIDOR = "#######\n#P_X_O#\n#######"  # optimal: Right, Right, Right
DETOUR = "######\n#__O_#\n#_X__#\n#P___#\n######"  # optimal length 5 (two pushes + repositioning)
CORNERED = "#####\n#X_O#\n#P__#\n#####"  # box stuck in a corner: unsolvable
TWO_BOXES = "#######\n#_X_O_#\n#P____#\n#_X_O_#\n#######"


def bfs_length(level):
    """Plain breadth-first search: the reference the A* solver must match."""
    targets = set(level.targets)
    seen = {level.start}
    queue = deque([(level.start, 0)])
    while queue:
        state, depth = queue.popleft()
        if set(state[1]) == targets:
            return depth
        for action in range(4):
            nxt, kind = move(level, state, action)
            if kind.changed and nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, depth + 1))
    return None


def replay(level, state, actions):
    for action in actions:
        state, _ = move(level, state, action)
    return state


# ----------------------------------------------------------------------------------- conformance
@pytest.mark.parametrize("render_mode", ["vision", "text", "both"])
@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_check_env_every_mode_and_format(render_mode, prompt_format):
    cross = prompt_format == "grounding_worldmodeling"  # one subprocess per render mode keeps this fast
    check_env(ENV_ID, {"render_mode": render_mode, "prompt_format": prompt_format}, cross_process=cross)


def test_presets_are_registered_with_their_distribution():
    spec = vista_rl.host().spec("envs", ENV_ID)
    assert spec.distribution == "vista-plugin-sokoban"
    easy = vista_rl.make_env("sokoban/sokoban-easy-v0")
    for seed in range(20):
        easy.reset(seed=seed)
        assert 1 <= easy.solution_length <= 5
    text_env = vista_rl.make_env("sokoban/sokoban-text-v0")
    observation, _ = text_env.reset(seed=0)
    assert not observation.images and "#\t#" in observation.text


def test_determinism_across_processes_with_oracle_and_garbage_turns():
    responses = ["oracle", "<answer>Left,Up</answer>", "garbage", "oracle", "oracle"]
    for config in ({"prompt_format": "no_think"}, {"render_mode": "both", "num_boxes": 2, "dim_room": [7, 7]}):
        local = episode_fingerprint(ENV_ID, config, 11, responses)
        assert fingerprint_in_subprocess(ENV_ID, config, 11, responses) == local
        assert episode_fingerprint(ENV_ID, config, 12, responses) != local


def test_pixels_of_a_fixed_seed_are_pinned():
    observation, _ = vista_rl.make_env(ENV_ID).reset(seed=7)
    image = observation.images[0]
    assert image.size == (96, 96) and image.mode == "RGB"
    assert hashlib.sha256(image.tobytes()).hexdigest() == (
        "4b434cc1bc1d58d8d28af963abdfe4262b30a18192387b47db7350c1d6a6cefb")
    other, _ = vista_rl.make_env(ENV_ID).reset(seed=8)
    assert other.images[0].tobytes() != image.tobytes()


@pytest.mark.parametrize("prompt_format", ["no_think", "grounding_worldmodeling"])
def test_incremental_frames_equal_full_redraws(prompt_format):
    env = vista_rl.make_env(ENV_ID, render_mode="vision", max_actions_per_step=1, prompt_format=prompt_format)
    assert_incremental_frames_match(env, ACTION_NAMES, seed=3)


# ----------------------------------------------------------------------------------- solver
def test_move_names_what_happened():
    """``move`` says BLOCKED / WALKED / PUSHED (an enum, not 0/1/2); a blocked move keeps the state."""
    level = parse_level("#######\n#P_XO_#\n#######")
    up, right = ACTION_NAMES.index("Up"), ACTION_NAMES.index("Right")
    state, kind = move(level, level.start, up)
    assert kind is Moved.BLOCKED and not kind.changed and state == level.start
    state, kind = move(level, state, right)
    assert kind is Moved.WALKED and kind.changed and state[1] == level.boxes
    state, kind = move(level, state, right)
    assert kind is Moved.PUSHED and kind.changed and state == (state[0], tuple(level.targets))
    state, kind = move(level, state, right)  # pushes the box off its target, against the wall
    assert kind is Moved.PUSHED
    assert move(level, state, right)[1] is Moved.BLOCKED


def test_solver_is_optimal_on_hand_made_levels():
    assert [ACTION_NAMES[a] for a in solve(parse_level(CORRIDOR))] == ["Right", "Right", "Right"]
    assert len(solve(parse_level(DETOUR))) == 5
    assert solve(parse_level(CORNERED)) is None
    two = parse_level(TWO_BOXES)
    plan = solve(two)
    assert len(plan) == bfs_length(two)
    assert set(replay(two, two.start, plan)[1]) == set(two.targets)


def test_solver_matches_bfs_and_the_generators_table_on_generated_levels():
    for seed in range(25):
        generated = generate_level(random.Random(seed), (7, 7), 2 if seed % 2 else 1)
        level = generated.level
        plan = solve(level)
        assert plan is not None and len(plan) == generated.solution_length == bfs_length(level)
        assert set(replay(level, level.start, plan)[1]) == set(level.targets)


def test_reverse_table_distances_are_exact():
    level = parse_level(DETOUR)
    table = reverse_distances(level, max_depth=50)
    assert table[level.start] == 5
    for state, distance in list(table.items())[:200]:
        assert bfs_length(type(level)(level.height, level.width, level.free, level.targets, state[1],
                                      state[0])) == distance


def test_level_filter_by_solution_steps_and_generation_errors():
    env = vista_rl.make_env(ENV_ID, min_solution_steps=6, max_solution_steps=9)
    for seed in range(15):
        env.reset(seed=seed)
        assert 6 <= env.solution_length <= 9
    with pytest.raises(GenerationError, match="widen"):
        generate_level(random.Random(0), (5, 5), 1, min_solution_steps=90, max_tries=5)


# ----------------------------------------------------------------------------------- rewards
def test_reward_sums_of_a_scripted_episode():
    env = vista_rl.make_env(ENV_ID, level=CORRIDOR, prompt_format="no_think", render_mode="text")
    env.reset(seed=0)
    bump = env.step("<answer>Left</answer>")  # into the wall: a step penalty, still a valid action
    assert bump.reward == pytest.approx(-0.1 + 0.5)
    assert bump.info["action_valid"] and not bump.info["action_effective"]
    invalid = env.step("<answer>Jump</answer>")
    assert invalid.reward == 0.0 and not invalid.info["action_valid"]
    assert "Up, Down, Left, Right" in invalid.observation.text and "'Jump'" in invalid.observation.text
    finish = env.step("<answer>Right,Right,Right,Right</answer>")  # 4th action is cut (max 3)
    assert finish.info["actions"] == ["Right", "Right", "Right"]
    assert finish.reward == pytest.approx(3 * -0.1 + 1.0 + 10.0 + 0.5)
    assert finish.terminated and finish.info["success"]
    assert sum(r.reward for r in (bump, invalid, finish)) == pytest.approx(11.6)
    assert env.step("<answer>Left</answer>").info["action_valid"] is False  # episode over


def test_pushing_a_box_off_its_target_costs_a_point_and_invalid_stops_the_turn():
    env = vista_rl.make_env(ENV_ID, level="########\n#P√__XO#\n########", prompt_format="free_think")
    env.reset(seed=0)
    result = env.step("<think>x</think><answer>Right, Dance, Left</answer>")
    assert result.info["actions"] == ["Right"] and result.info["invalid_action"] == "Dance"
    assert result.reward == pytest.approx(-0.1 - 1.0)  # no format reward: an action was invalid
    assert result.info["state_before"]["boxes_on_target"] == 1 and result.info["state"]["boxes_on_target"] == 0


def test_max_steps_truncates():
    env = vista_rl.make_env(ENV_ID, max_steps=4, prompt_format="no_think")
    env.reset(seed=1)
    env.step("<answer>Up,Up,Up</answer>")
    result = env.step("<answer>Down,Down,Down</answer>")
    assert result.truncated and not result.terminated and result.info["steps"] == 4
    assert result.info["actions"] == ["Down"]


def test_bad_format_takes_no_action_and_explains():
    env = vista_rl.make_env(ENV_ID, prompt_format="grounding")
    env.reset(seed=2)
    result = env.step("<think>no sub tags</think><answer>Up</answer>")
    assert not result.info["format_ok"] and result.info["actions"] == [] and result.reward == 0.0
    assert "<observation>" in result.observation.text


# ----------------------------------------------------------------------------------- oracle
@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_oracle_responses_are_well_formed_and_predictions_true(prompt_format):
    env = vista_rl.make_env(ENV_ID, prompt_format=prompt_format, num_boxes=2, dim_room=(7, 7))
    for seed in range(5):
        last = play_oracle_checked(env, seed)
        assert last.info["success"] and last.info["state"]["boxes_on_target"] == 2


def test_expert_trajectories_replay_to_success():
    trajectories = list(generate_expert_trajectories(ENV_ID, range(10), prompt_format="free_think"))
    assert len(trajectories) == 10
    env = vista_rl.make_env(ENV_ID, prompt_format="free_think")
    for trajectory in trajectories:
        assert trajectory.success and trajectory.turns
        env.reset(seed=trajectory.seed)
        rewards = [env.step(turn.response).reward for turn in trajectory.turns]
        assert rewards == [turn.reward for turn in trajectory.turns]
        assert trajectory.turns[-1].info["success"] and trajectory.total_reward > 10
    unsolved = expert_trajectory(vista_rl.make_env(ENV_ID, level=CORNERED), seed=0)
    assert not unsolved.success and unsolved.failure


# ----------------------------------------------------------------------------------- config
def test_config_errors_name_the_key():
    with pytest.raises(ValidationError, match="dim_room"):
        vista_rl.make_env(ENV_ID, dim_room=(2, 2))
    with pytest.raises(ValidationError, match="overlap"):
        vista_rl.make_env(ENV_ID, train_seeds=(0, 100), test_seeds=(50, 150))
    with pytest.raises(ValidationError, match="prompt_format"):
        vista_rl.make_env(ENV_ID, prompt_format="free_form")
    env = vista_rl.make_env(ENV_ID)
    assert not set(env.config.seeds("train")) & set(env.config.seeds("test"))


# ----------------------------------------------------------------------------------- fuzzing
_FUZZ_ENV = vista_rl.make_env(ENV_ID, render_mode="both", prompt_format="free_think")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=model_outputs(ACTION_NAMES))
def test_any_string_gives_a_valid_step_result(text):
    _FUZZ_ENV.reset(seed=len(text) % 7)
    result = _FUZZ_ENV.step(text)
    assert isinstance(result, vista_rl.StepResult)
    assert result.observation.text.count("<image>") == len(result.observation.images) == 1
    assert isinstance(result.info["format_ok"], bool) and isinstance(result.info["action_valid"], bool)
    assert len(result.info["actions"]) <= 3
    assert len(result.observation.text) < 5_000

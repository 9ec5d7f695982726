"""The navigation env: conformance, determinism across processes, VAGEN's reward shape, the oracle
on every seed, the renderer's geometry, and serving it through ``vista env-server`` as ``remote/<id>``."""

from __future__ import annotations

import hashlib
import math
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError
from vista_plugin_gamekit.expert import generate_expert_trajectories
from vista_plugin_gamekit.formats import PROMPT_FORMATS
from vista_plugin_navigation import planner
from vista_plugin_navigation.world import (
    ACTION_NAMES,
    COLOURS,
    GenerationError,
    Pose,
    generate_world,
    next_pose,
)

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.game_testing import (
    episode_fingerprint,
    fingerprint_in_subprocess,
    model_outputs,
    play_oracle_checked,
)

ENV_ID = "navigation/navigation-v0"
SMALL = "navigation/navigation-small-v0"
PINNED_SEED_7 = "700f729a4d7638d21a5c46fa1392427db9ff3fa27ede79f02aef1637c6e1d244"


def _answer(actions: str) -> str:
    return f"<think>going</think><answer>{actions}</answer>"


@pytest.mark.parametrize("env_id", [ENV_ID, SMALL, "navigation/navigation-text-v0"])
def test_registered_envs_pass_check_env(env_id: str) -> None:
    check_env(env_id)  # includes the same episodes in a fresh process
    assert vista_rl.host().spec("envs", env_id).distribution == "vista-plugin-navigation"


def test_vista_envs_lists_the_navigation_envs() -> None:
    import json

    from click.testing import CliRunner

    from vista_rl.cli import build_cli

    result = CliRunner().invoke(build_cli(), ["envs", "--json"])
    assert result.exit_code == 0, result.output
    listed = {item["id"]: item for item in json.loads(result.output)}
    for env_id in (ENV_ID, SMALL, "navigation/navigation-text-v0"):
        assert listed[env_id]["distribution"] == "vista-plugin-navigation"


@pytest.mark.parametrize("prompt_format", PROMPT_FORMATS)
def test_every_prompt_format_passes_check_env(prompt_format: str) -> None:
    check_env(SMALL, {"prompt_format": prompt_format, "render_mode": "both"}, cross_process=False)


def test_episodes_are_identical_across_processes_and_differ_across_seeds() -> None:
    responses = [_answer("rotateleft,moveahead,lookdown"), "oracle", _answer("moveback,moveright"), "oracle",
                 "garbage", "oracle"]
    config = {"prompt_format": "free_think", "render_mode": "both"}
    local = episode_fingerprint(SMALL, config, 11, responses)
    assert fingerprint_in_subprocess(SMALL, config, 11, responses) == local
    assert episode_fingerprint(SMALL, config, 12, responses) != local


def test_pixels_of_a_fixed_seed_are_pinned() -> None:
    observation, info = vista_rl.make_env(ENV_ID).reset(seed=7)
    image = observation.images[0]
    assert image.size == (255, 255) and image.mode == "RGB"
    assert hashlib.sha256(image.tobytes()).hexdigest() == PINNED_SEED_7
    assert info["state"]["instruction"].startswith("Navigate to the ")


@pytest.mark.parametrize("env_id,seeds", [(ENV_ID, range(0, 40)), (SMALL, range(100, 130))])
def test_oracle_reaches_the_target_on_every_seed(env_id: str, seeds: range) -> None:
    env = vista_rl.make_env(env_id, prompt_format="grounding_worldmodeling")
    for seed in seeds:
        last = play_oracle_checked(env, seed, max_turns=30)  # also: strict format, predictions come true
        state = last.info["state"]
        assert last.terminated and last.info["success"], f"seed {seed}"
        assert state["distance_to_target"] <= 1.5 and state["success"]
        assert last.info["steps"] <= env.config.max_steps
        assert last.reward >= 10.0 + 0.5  # success reward + format reward, VAGEN's shape


def test_start_is_outside_the_threshold_and_reward_shape() -> None:
    env = vista_rl.make_env(ENV_ID, prompt_format="free_think")
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert info["state"]["distance_to_target"] > 1.5 and not info["state"]["success"]
    env.reset(seed=3)
    plan = planner.plan(env.world, env.pose)
    assert plan and len(plan) > 1
    first = env.step(_answer(ACTION_NAMES[plan[0]]))
    assert first.reward == pytest.approx(0.5) and not first.done  # format reward only
    bad = env.step(_answer("fly"))
    assert bad.reward == 0.0 and not bad.info["action_valid"] and "not a valid action" in bad.info["feedback"]
    malformed = env.step("moveahead")
    assert malformed.reward == 0.0 and not malformed.info["format_ok"]


def test_blocked_moves_are_reported_and_change_nothing() -> None:
    env = vista_rl.make_env(SMALL, render_mode="both", prompt_format="free_think")
    env.reset(seed=4)
    world = env.world
    # turn until a wall or an object is straight ahead, then walk into it
    for _ in range(4):
        if next_pose(world, env.pose, 0) is None:
            break
        env.step(_answer("rotateright"))
    while next_pose(world, env.pose, 0) is not None:
        env.step(_answer("moveahead"))
        if env._done:
            pytest.skip("reached the target before a wall")
    before = env.pose
    result = env.step(_answer("moveahead,lookup,lookup"))
    assert env.pose.row == before.row and env.pose.col == before.col
    assert env.pose.horizon == -30  # one look up allowed, the second is past the limit
    assert "could not be executed" in result.info["feedback"] and "moveahead, lookup" in result.info["feedback"]
    assert result.info["action_valid"] and result.reward == pytest.approx(0.5)


def test_truncates_after_max_steps() -> None:
    env = vista_rl.make_env(SMALL, max_steps=6, prompt_format="free_think")
    env.reset(seed=1)
    results = [env.step(_answer("rotateleft,rotateleft,rotateleft")) for _ in range(2)]
    assert not results[0].done and results[1].truncated and not results[1].terminated
    assert env.step(_answer("rotateleft")).info["action_valid"] is False  # the episode is over


def test_views_follow_the_pose() -> None:
    env = vista_rl.make_env(SMALL, prompt_format="free_think")
    observation, _ = env.reset(seed=9)
    first = np.asarray(observation.images[0])
    frames = [np.asarray(env.step(_answer("rotateright")).observation.images[0]) for _ in range(4)]
    assert not np.array_equal(frames[0], first)
    assert np.array_equal(frames[3], first)  # a full turn is the same view (and the same cache entry)
    env._frames.clear()
    assert np.array_equal(env.render_image(), first)  # a fresh render equals the cached frame
    down = np.asarray(env.step(_answer("lookdown")).observation.images[0])
    floor = (down[..., 2] < down[..., 0]).mean()  # the floor is warm brown, the ceiling cool grey
    assert floor > (first[..., 2] < first[..., 0]).mean()


def test_text_map_and_egocentric_relations_agree_with_the_state() -> None:
    env = vista_rl.make_env("navigation/navigation-text-v0", prompt_format="free_think")
    observation, info = env.reset(seed=5)
    assert not observation.images
    lines = env._text_grid().splitlines()
    pose = env.pose
    assert lines[pose.row][pose.col] == "^>v<"[pose.heading]
    for index, obj in enumerate(env.world.objects):
        assert lines[obj.cell[0]][obj.cell[1]] == str(index + 1) and obj.name in lines[-1]
    for _ in range(4):
        state, relations = env._state(), env._relations()
        target = next(r for r in relations if r["object_id"] == state["target_obj_type"])
        direction = state["target_relative_direction"]
        assert target["vertical_relation"] == {"ahead": "ahead", "back": "behind"}.get(direction, "same")
        if direction in ("left", "right"):
            assert target["horizontal_relation"] == direction
        env._apply(ACTION_NAMES.index("rotateright"))
    # a quarter turn right moves every object a quarter turn left in the agent's frame
    before = {r["object_id"]: r for r in env._relations()}
    env._apply(ACTION_NAMES.index("rotateright"))
    for relation in env._relations():
        if before[relation["object_id"]]["horizontal_relation"] == "right" and \
                before[relation["object_id"]]["vertical_relation"] == "same":
            assert relation["vertical_relation"] == "ahead"


def test_the_target_is_in_the_image_when_the_state_says_it_is_in_view() -> None:
    env = vista_rl.make_env(ENV_ID, fog=0.0)
    checked = 0
    for seed in range(30):
        env.reset(seed=seed)
        for _ in range(4):
            state = env._state()
            colour = np.array(COLOURS[env.world.target_object.colour])
            image = np.asarray(env.render_image()).astype(int)
            near = (np.abs(image - colour).max(-1) <= 80).sum()  # shading darkens the edges
            in_view = any(o["type"] == env.world.target_object.name for o in state["visible_objects"])
            if in_view:
                assert near > 0, f"seed {seed}: target in view but not drawn"
                checked += 1
            env._apply(ACTION_NAMES.index("rotateright"))
    assert checked >= 10


def test_wall_distance_matches_geometry() -> None:
    env = vista_rl.make_env(SMALL, resolution=64)
    env.reset(seed=2)
    world = env.world
    for heading in range(4):
        pose = Pose(env.pose.row, env.pose.col, heading, 0)
        dist, _, _ = env._raycaster._cast(env._grid, pose)
        # the centre column looks straight ahead: count free floor cells (objects do not stop rays)
        row, col, steps = pose.row, pose.col, 0
        dr, dc = ((-1, 0), (0, 1), (1, 0), (0, -1))[heading]
        while world.grid[row + dr][col + dc] == 0:
            row, col, steps = row + dr, col + dc, steps + 1
        centre = dist[len(dist) // 2 - 1: len(dist) // 2 + 1].mean()
        assert math.isclose(centre, steps + 0.5, abs_tol=0.05), (heading, centre, steps)


def _march(grid: tuple[tuple[int, ...], ...], x: float, y: float, dx: float, dy: float) -> float:
    """Reference: walk the ray in tiny steps until it is inside a wall cell."""
    t = 0.0
    while grid[int(math.floor(y + t * dy))][int(math.floor(x + t * dx))] == 0:
        t += 0.002
    return t


def test_every_column_agrees_with_a_brute_force_ray_march() -> None:
    env = vista_rl.make_env(SMALL, resolution=24)
    for seed in range(6):
        env.reset(seed=seed)
        for heading in range(4):
            pose = Pose(env.pose.row, env.pose.col, heading, 0)
            dist, _, _ = env._raycaster._cast(env._grid, pose)
            fx, fy = ((0, -1), (1, 0), (0, 1), (-1, 0))[heading]
            for column, offset in enumerate(env._raycaster._columns):
                dx, dy = fx - fy * offset, fy + fx * offset
                expected = _march(env.world.grid, pose.col + 0.5, pose.row + 0.5, dx, dy)
                assert abs(dist[column] - expected) < 0.01, (seed, heading, column, dist[column], expected)


def test_generator_and_config_errors_are_clear() -> None:
    import random

    with pytest.raises(GenerationError, match="lower wall_density"):
        generate_world(random.Random(0), 5, 9, 0.0, 3.0, 1, 2, tries=5)
    with pytest.raises(ValidationError, match="max_solution_cells"):
        vista_rl.make_env(ENV_ID, min_solution_cells=5, max_solution_cells=4)
    with pytest.raises(ValidationError):
        vista_rl.make_env(ENV_ID, resolution=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_outputs(ACTION_NAMES))
def test_hostile_model_outputs_never_raise(response: str) -> None:
    env = vista_rl.make_env(SMALL, resolution=32)
    env.reset(seed=0)
    result = env.step(response)
    assert math.isfinite(result.reward) and result.observation.text.count("<image>") == len(result.observation.images)


def test_expert_trajectories_for_sft() -> None:
    trajectories = list(generate_expert_trajectories(SMALL, range(3), prompt_format="grounding"))
    assert len(trajectories) == 3 and all(t.success for t in trajectories)
    assert all("<observation>The " in turn.response for t in trajectories for turn in t.turns)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_served_by_vista_env_server_and_played_as_remote() -> None:
    """The README's worked example, on 127.0.0.1: what a GPU box hosting AI2-THOR would run,
    with this env standing in for it."""
    port = _free_port()
    command = [sys.executable, "-c", "from vista_rl.cli import main; main()", "env-server",
               "--env", SMALL, "--port", str(port), "--token", "tok", "--set", "max_steps=20"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.HTTPError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.3)
        remote = vista_rl.make_env(f"remote/{SMALL}", url=url, token="tok")
        local = vista_rl.make_env(SMALL, max_steps=20)
        try:
            observation, info = remote.reset(seed=21)
            expected, expected_info = local.reset(seed=21)
            assert observation.images[0].tobytes() == expected.images[0].tobytes()
            assert info["state"] == expected_info["state"]
            for _ in range(20):
                response = remote.oracle_response()
                assert response == local.oracle_response()
                result, expected_result = remote.step(response), local.step(response)
                assert result.reward == expected_result.reward
                assert result.observation.images[0].tobytes() == expected_result.observation.images[0].tobytes()
                if result.done:
                    break
            assert result.info["success"] and result.terminated
        finally:
            remote.close()
    finally:
        process.terminate()
        process.wait(timeout=20)

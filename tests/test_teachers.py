"""Scripted teachers with systematic, stated errors (issue 38): each fails exactly where its stated
flaw says, the perfect oracle stays the default, and SFT data generation picks the teacher up through
the env config (``teacher: NAME``)."""

from __future__ import annotations

import pytest
from vista_plugin_frozenlake.lake import ACTION_NAMES, from_rows
from vista_plugin_frozenlake.teachers import coin_walk_plan, goalward_plan, hole_blind_plan
from vista_plugin_grounding.teachers import coin, teacher_place
from vista_plugin_sokoban.level import Moved, move, parse_level
from vista_plugin_sokoban.solver import solve
from vista_plugin_sokoban.teachers import UP, teacher_plan
from vista_plugin_visual_search.small import generate_marker_scene
from vista_plugin_visual_search.teachers import coin_column, teacher_marker

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs


def names(plan: list[int]) -> list[str]:
    return [ACTION_NAMES[action] for action in plan]


def test_goalward_never_steps_away_and_fails_where_the_only_path_detours():
    # Start (0,0), goal (0,2), a hole between them: every path detours through row 1.
    lake = from_rows(["SHGF", "FFFF", "FFFF", "FFFF"])
    plan = goalward_plan(lake, lake.start)
    assert names(plan) == ["Right"]  # the only move toward the goal, into the hole
    assert lake.distance[lake.start] == 4  # the oracle's path exists (down, right, right, up)
    # Where a path toward the goal exists, it is a shortest one.
    open_lake = from_rows(["SFFF", "FHFF", "FFFF", "FFFG"])
    plan = goalward_plan(open_lake, open_lake.start)
    assert len(plan) == open_lake.distance[open_lake.start] == 6


def test_hole_blind_walks_row_first_into_holes():
    lake = from_rows(["SFHF", "FFFF", "FFFG", "FFFF"])
    assert names(hole_blind_plan(lake, lake.start)) == ["Right", "Right", "Right", "Down", "Down"]


def test_coin_walk_only_shortens_the_distance_ignores_holes_and_takes_both_moves_across_maps():
    # Where two moves lead toward the goal the coin picks one; it walks into a hole as readily.
    lake = from_rows(["SFHF", "FFFF", "FFFG", "FFFF"])
    plan = coin_walk_plan(lake, lake.start)
    assert coin_walk_plan(lake, lake.start) == plan  # a hash, not a random draw: reproducible
    assert sorted(names(plan)) == ["Down", "Down", "Right", "Right", "Right"]  # a shortest staircase
    # Its first move from the same start toward the same goal differs between maps (the holes elsewhere
    # differ), so a policy cloned from it keeps both moves in its support.
    firsts = {names(coin_walk_plan(from_rows(rows), 0))[0] for rows in (
        ["SFFF", "FFFF", "FFFF", "FFFG"], ["SFFF", "FFFH", "FFFF", "FFFG"], ["SFFF", "FFFF", "HFFF", "FFFG"],
        ["SFFF", "FFFF", "FFHF", "FFFG"], ["SFFF", "HFFF", "FFFF", "FFFG"], ["SFFF", "FFFF", "FFFH", "FFFG"])}
    assert firsts == {"Right", "Down"}


def play(env_id: str, config: dict, seeds: range, max_turns: int = 6) -> list[bool]:
    rollout = RolloutSection(max_turns=max_turns, group_size=1, batch_size=16)
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), rollout, seed=0) as engine:
        return [bool(t.success) for t in engine.run(episode_specs(env_id, seeds, 1, config))]


FROZENLAKE = {"render_mode": "vision", "prompt_format": "no_think", "max_actions_per_step": 1,
              "random_start_goal": True, "max_solution_steps": 5}


SOKOBAN = {"render_mode": "text", "prompt_format": "no_think", "max_actions_per_step": 1,
           "max_solution_steps": 4}


@pytest.mark.parametrize("env_id, config, teacher, low, high", [
    ("frozenlake/frozenlake-v0", FROZENLAKE, "hole_blind", 0.6, 0.9),
    ("frozenlake/frozenlake-v0", FROZENLAKE, "goalward", 0.85, 0.999),
    ("frozenlake/frozenlake-v0", FROZENLAKE, "coin_walk", 0.6, 0.9),
    ("visual_search/zoom-small-v0", {"prompt_format": "no_think"}, "first_column", 0.45, 0.8),
    ("visual_search/zoom-small-v0", {"prompt_format": "no_think"}, "coin_column", 0.45, 0.8),
    ("grounding/zoom-spot-v0", {"execute_tools": True}, "off_right", 0.55, 0.9),
    ("grounding/zoom-spot-v0", {"execute_tools": True}, "coin_right", 0.7, 0.95),
    ("sokoban/sokoban-v0", SOKOBAN, "no_up_push", 0.55, 0.85),
])
def test_a_flawed_teacher_fails_on_its_share_and_the_oracle_stays_perfect(env_id, config, teacher, low, high):
    seeds = range(1000, 1120)
    assert all(play(env_id, config, seeds))  # the default teacher is the exact oracle
    wins = play(env_id, {**config, "teacher": teacher}, seeds)
    assert low <= sum(wins) / len(wins) <= high


def test_first_column_zooms_at_the_rows_first_marker_and_answers_what_it_sees():
    env = vista_rl.make_env("visual_search/zoom-small-v0", teacher="first_column", prompt_format="no_think")
    for seed in range(20):
        _, info = env.reset(seed=seed)
        scene = generate_marker_scene(seed)
        looked = teacher_marker("first_column", scene.target, 2)
        assert looked % 2 == 0 and looked // 2 == scene.target // 2
        x, y = scene.centres[looked]
        assert f"[{x}, {y}]" in env.oracle_response()
        assert info["teacher_point"] == [x, y]
    assert teacher_marker("oracle", 3, 2) == 3
    with pytest.raises(ValueError, match="unknown"):
        teacher_marker("psychic", 0, 2)


def test_coin_column_reads_the_row_zooms_at_a_coin_column_and_clones_would_see_both():
    env = vista_rl.make_env("visual_search/zoom-small-v0", teacher="coin_column", prompt_format="no_think")
    columns = set()
    for seed in range(40):
        _, info = env.reset(seed=seed)
        scene = generate_marker_scene(seed)
        looked = teacher_marker("coin_column", scene.target, 2, scene.colours)
        assert looked // 2 == scene.target // 2  # the named row
        assert teacher_marker("coin_column", scene.target, 2, list(scene.colours)) == looked  # reproducible
        # The coin is the scene's, not the question's: asked about any marker of the scene, the same column.
        assert {teacher_marker("coin_column", target, 2, scene.colours) % 2 for target in range(4)} == {looked % 2}
        columns.add(looked % 2)
        x, y = scene.centres[looked]
        assert info["teacher_point"] == [x, y] and f"[{x}, {y}]" in env.oracle_response()
        assert env.problem.oracle_answer == scene.colours[looked]  # answers what it sees there
    assert columns == {0, 1}  # across seeds it zooms at both columns
    # A CRC-32, not Python's salted hash: the same number in every process.
    assert coin_column(["red", "green", "blue", "orange"], 2) == 524685539 % 2
    with pytest.raises(ValueError, match="colours"):
        teacher_marker("coin_column", 0, 2)


def test_off_right_cites_the_last_column_one_cell_left():
    assert [teacher_place("off_right", i, 3) for i in range(9)] == [0, 1, 1, 3, 4, 4, 6, 7, 7]
    env = vista_rl.make_env("grounding/zoom-spot-v0", teacher="off_right")
    shifted = 0
    for seed in range(30):
        _, info = env.reset(seed=seed)
        reply = env.oracle_response()
        if info["teacher_point"] != info["target_point"]:
            shifted += 1
            assert info["target_point"][0] > info["teacher_point"][0]
        assert f"[{info['teacher_point'][0]}, {info['teacher_point'][1]}]" in reply
    assert shifted > 0


def test_coin_right_is_off_right_on_most_seeds_and_right_on_the_rest():
    off, right = 0, 0
    for seed in range(400):
        places = [teacher_place("coin_right", i, 3, seed) for i in range(9)]
        assert places == [teacher_place("coin_right", i, 3, seed) for i in range(9)]  # reproducible
        assert places[:2] + places[3:5] + places[6:8] == [0, 1, 3, 4, 6, 7]  # other columns: exact
        assert places[2::3] in ([2, 5, 8], [1, 4, 7])  # the last column: the frame or one cell left, per seed
        right += places[2] == 2
        off += places[2] == 1
    assert off + right == 400 and 0.2 <= right / 400 <= 0.4  # about 30% right: the clone keeps the right x
    assert [coin(seed) for seed in (0, 7)] == [0.482, 0.761]  # pinned: a CRC-32, not a salted hash, so every process and engine agrees


def test_no_up_push_never_pushes_a_box_up_and_has_no_move_where_every_solution_does():
    # The box sits below its target in a one-cell corridor: the only solution pushes it up.
    corridor = parse_level("###\n#O#\n#X#\n#P#\n###")
    assert solve(corridor) == [UP]
    assert teacher_plan("no_up_push", corridor, corridor.start) is None
    # A box left of its target: a push Right, which the teacher makes like the oracle.
    sideways = parse_level("#####\n#PXO#\n#####")
    assert teacher_plan("no_up_push", sideways, sideways.start) == solve(sideways)
    # On generated levels, its plans push down, left or right only.
    env = vista_rl.make_env("sokoban/sokoban-v0", render_mode="text", max_solution_steps=4)
    for seed in range(40):
        env.reset(seed=seed)
        state = env.level.start
        for action in teacher_plan("no_up_push", env.level, state) or []:
            state, kind = move(env.level, state, action)
            assert not (kind is Moved.PUSHED and action == UP)
    with pytest.raises(ValueError, match="unknown"):
        teacher_plan("psychic", corridor, corridor.start)


def test_sft_keeps_a_flawed_teachers_failures_only_when_asked():
    from vista_rl.config import RunConfig
    from vista_rl.rollout.teacher_data import teacher_episodes

    def run(keep_failed: bool) -> RunConfig:
        return RunConfig.model_validate({
            "env": {"id": "frozenlake/frozenlake-v0", "config": {**FROZENLAKE, "teacher": "hole_blind"}},
            "model": {"backend": "scripted", "path": "oracle"},
            "rollout": {"max_turns": 6, "batch_size": 16},
            "sft": {"steps": 1, "seeds": {"start": 1000, "count": 60}, "keep_failed": keep_failed}})

    rejection, cloning = teacher_episodes(run(False)), teacher_episodes(run(True))
    assert rejection.played == cloning.played == 60 and rejection.succeeded == cloning.succeeded
    assert all(t.success for t in rejection.kept) and len(rejection.kept) == rejection.succeeded
    assert len(cloning.kept) == 60 > cloning.succeeded  # the teacher's walks into holes are kept too
    assert "failed ones kept" in cloning.summary() and "that succeeded" in rejection.summary()

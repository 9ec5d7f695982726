"""``grounding/zoom-spot-v0``: the frame is visible in the view, the dot's colour is not, and a
``search_coordinate`` zoom at the cited point shows it (the grounded-reasoning job's task)."""

import numpy as np
import pytest
from vista_plugin_grounding.spot import generate_spot_scene
from vista_plugin_scenekit.markers import BACKGROUND, DOT_COLOURS

import vista_rl
from vista_rl_sdk import check_env

ENV = "grounding/zoom-spot-v0"


def zoom_env(**config):
    env = vista_rl.make_env(ENV, execute_tools=True, **config)
    env._tools["search_coordinate"] = vista_rl.make_tool("search_coordinate", offset=2, crop_size=112)
    return env


@pytest.mark.parametrize("config", [{}, {"tools": [], "grid": 2}])
def test_conformance(config):
    check_env(ENV, config, seeds=(0, 1))


def test_the_view_shows_where_the_frame_is_and_nothing_of_the_colour():
    views = {}
    for seed in range(40):
        scene = generate_spot_scene(seed)
        view = np.asarray(scene.shown).astype(int)
        x0, y0, x1, y1 = scene.frame
        inside = view[y0 + 1:y1, x0 + 1:x1]
        assert (inside == BACKGROUND).all()  # the marker is exactly background grey in the view
        assert (view[y0, x0:x1 + 1] != BACKGROUND).all()  # the frame's top edge is visible
        assert x0 < scene.point[0] < x1 and scene.point in scene.places
        views.setdefault(scene.point, set()).add((scene.colour, view.tobytes()))
    # same place, different colours: the same view (so no policy reads the colour from it)
    for seen in views.values():
        assert len({image for _, image in seen}) == 1
    assert any(len({colour for colour, _ in seen}) > 1 for seen in views.values())


def test_oracle_zooms_at_the_frame_and_earns_the_full_grounded_reward():
    env = zoom_env()
    for seed in range(6):
        _, info = env.reset(seed=seed)
        call = env.oracle_response()
        x, y = info["target_point"]
        assert f"({x}, {y})" in call and "search_coordinate" in call
        crop = env.step(call).observation.images[0]
        pixels = {tuple(p) for p in np.asarray(crop).reshape(-1, 3)}
        assert DOT_COLOURS[info["dot_colour"]] in pixels  # the zoom shows the dot plainly
        result = env.step(env.oracle_response())
        assert result.info["success"] and result.info["grounded"]
        assert result.reward == pytest.approx(0.6 + 0.4)  # ViGoRL multi-turn: 0.6 acc + 0.4 format


def test_a_zoom_elsewhere_shows_no_colour_and_scores_the_format_only():
    env = zoom_env()
    _, info = env.reset(seed=3)
    x, y = next(p for p in generate_spot_scene(3).places if list(p) != info["target_point"])
    call = (f'<think>The frame is at ({x}, {y}).</think><tool_call>{{"name": "search_coordinate", '
            f'"arguments": {{"coordinate": [{x}, {y}]}}}}</tool_call>')
    crop = env.step(call).observation.images[0]
    assert {tuple(p) for p in np.asarray(crop).reshape(-1, 3)} == {BACKGROUND}
    wrong = next(c for c in DOT_COLOURS if c != info["dot_colour"])
    result = env.step(f"<think>The zoom shows a {wrong} dot.</think><answer>{wrong}</answer>")
    assert not result.info["success"] and not result.info["grounded"] and result.reward == pytest.approx(0.4)


def test_the_confused_teacher_zooms_one_column_left_yet_answers_right():
    env = zoom_env(oracle_confusion=1.0)
    shifted = 0
    for seed in range(12):
        _, info = env.reset(seed=seed)
        target, teacher = info["target_point"], info["teacher_point"]
        places = generate_spot_scene(seed).places
        column = places.index(tuple(target)) % 3
        assert teacher == (target if column == 0 else list(places[places.index(tuple(target)) - 1]))
        crop = env.step(env.oracle_response()).observation.images[0]
        sees_dot = DOT_COLOURS[info["dot_colour"]] in {tuple(p) for p in np.asarray(crop).reshape(-1, 3)}
        assert sees_dot == (column == 0)  # a zoom one column off shows background only
        result = env.step(env.oracle_response())
        assert result.info["success"]  # right answer, wrong grounding: passes an answer filter
        shifted += column != 0
    assert shifted > 0
    assert tuple(vista_rl.make_env(ENV).reset(seed=4)[1]["teacher_point"]) == generate_spot_scene(4).point  # default 0

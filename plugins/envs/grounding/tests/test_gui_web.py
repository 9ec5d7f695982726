import numpy as np
import pytest
from vista_plugin_grounding.page import app_window, shop_page
from vista_plugin_grounding.web import ClickActionJudge, parse_click

import vista_rl
from vista_rl import ToolContext, parse_response
from vista_rl_sdk import check_env


@pytest.mark.parametrize("env_id,config", [
    ("grounding/gui-v0", {}),
    ("grounding/gui-v0", {"tools": [], "grounding_reward": "single_turn", "width": 640, "height": 400}),
    ("grounding/web-action-v0", {}),
    ("grounding/web-action-v0", {"task_kinds": ["add_cheapest"], "prompt_format": "no_think"}),
])
def test_conformance(env_id, config):
    check_env(env_id, config, seeds=(0, 1))


def test_widgets_are_drawn_inside_their_boxes_and_do_not_overlap():
    screen = app_window(5)
    pixels = np.asarray(screen.image).astype(int)
    background = pixels[300, 5]
    for widget in screen.widgets:
        x1, y1, x2, y2 = widget.box
        patch = pixels[y1:y2, x1:x2]
        assert (np.abs(patch - background).sum(axis=2) > 30).any(), widget  # something is drawn there
    boxes = [w.box for w in screen.widgets]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    assert app_window(5).image.tobytes() == screen.image.tobytes()


def _run_with_tools(env, seed):
    """The oracle through env.step, running its tool calls as the rollout engine does."""
    observation, info = env.reset(seed=seed)
    images = list(observation.images)
    result = None
    for _ in range(env.config.max_turns):
        text = env.oracle_response()
        result = env.step(text)
        for call in parse_response(text).tool_calls:
            out = vista_rl.make_tool(call.name)(call.arguments, ToolContext(images=images,
                                                                            metadata=env.tool_context_metadata()))
            assert not out.error, out.text
            images.extend(out.images)
        if result.done:
            break
    return result, images, info


def test_gui_oracle_zooms_then_clicks_inside_the_box_multi_turn_reward():
    env = vista_rl.make_env("grounding/gui-v0")
    for seed in range(4):
        result, images, info = _run_with_tools(env, seed)
        assert len(images) == 2 and result.info["success"]
        # 0.6 * acc + 0.4 * (1 + 0.2 * (unique points - 1)); think and zoom name the same point
        assert result.reward == pytest.approx(0.6 + 0.4 * 1.0) and result.info["grounded"]


def test_gui_point_in_box_reward_and_no_bonus_for_points_in_think():
    """ViGoRL's multi-turn bonus counts unique zoom coordinates only (test_grounded_engine.py);
    points written in ``<think>`` earn none."""
    env = vista_rl.make_env("grounding/gui-v0", tools=[])
    _, info = env.reset(seed=2)
    x1, y1, x2, y2 = info["target_box"]
    inside = ((x1 + x2) // 2, (y1 + y2) // 2)
    outside = (x2 + 40, y2 + 40)
    think = "<think>Looked at (5, 5), (100, 100) and (104, 104).</think>"  # 2 unique points (10 px rule)
    cases = {f"{think}<answer> ({inside[0]}, {inside[1]}) </answer>": 0.6 + 0.4,
             f"{think}<answer> ({outside[0]}, {outside[1]}) </answer>": 0.4,
             f"<think>here</think><answer>{inside[0]}, {inside[1]}</answer>": 1.0}
    for text, expected in cases.items():
        env.reset(seed=2)
        result = env.step(text)
        assert result.done and result.reward == pytest.approx(expected), (text, result.info)
    env.reset(seed=2)
    garbage = env.step("<think>hm</think><answer>the save button</answer>")
    assert garbage.reward == pytest.approx(0.4) and not garbage.info["action_valid"] and not garbage.info["success"]


def test_gui_offers_the_configured_zoom_tool_only():
    env = vista_rl.make_env("grounding/gui-v0", tools=["crop_zoom"])
    assert env.tools == ("crop_zoom",) and "crop_zoom" in env.system_prompt()
    env.reset(seed=0)
    unknown = env.step('<think>z</think><tool_call>{"name": "search_coordinate", "arguments": '
                       '{"coordinate": [3, 4]}}</tool_call>')
    assert not unknown.done and not unknown.info["action_valid"] and "Unknown tool" in unknown.observation.text
    assert "crop_zoom" not in vista_rl.make_env("grounding/gui-v0", tools=[]).system_prompt()


def test_click_parsing_and_judge():
    assert parse_click("click [12]") == 12 and parse_click(" Click [ 3 ]. ") == 3
    assert parse_click("click 12") is None and parse_click("type [3] hello") is None and parse_click(None) is None
    judge = ClickActionJudge()
    assert judge("click [7]", 7).score == 1.0 and judge("click [17]", 7).score == 0.0
    assert judge("click [7]", "click [7]").score == 1.0
    with pytest.raises(ValueError):
        judge("click [7]", "the save button")


def test_web_tasks_target_the_right_element():
    env = vista_rl.make_env("grounding/web-action-v0")
    for seed in range(12):
        _, info = env.reset(seed=seed)
        screen = shop_page(seed)
        target = next(w for w in screen.widgets if w.id == info["target_id"])
        adds = {w.extra["product"]: w.extra["price"] for w in screen.widgets if w.label == "Add to cart"}
        if info["task_kind"] == "add_cheapest":
            assert target.label == "Add to cart" and target.extra["price"] == min(adds.values())
        elif info["task_kind"] == "details_priciest":
            assert target.label == "Details" and target.extra["price"] == max(adds.values())
        elif info["task_kind"] == "open_cart":
            assert target.label == "Cart"
        result = env.step(env.oracle_response())
        assert result.info["success"] and result.reward == pytest.approx(1.0) and result.info["grounded"]
        env.reset(seed=seed)
        wrong_id = info["target_id"] % len(screen.widgets) + 1
        wrong = env.step(f"<think>At (10, 10).</think><answer>click [{wrong_id}]</answer>")
        assert wrong.reward == pytest.approx(0.5) and not wrong.info["success"] and wrong.info["action_valid"]


def test_gui_oracle_zooms_with_vigorls_search_coordinate(tmp_path):
    """With plugins/judges/vigorl installed, ``tools: [search_coordinate]`` serves the GUI env's zoom: the
    oracle's call runs through the real rollout engine and every episode succeeds."""
    from vista_rl.config import RolloutSection
    from vista_rl.rollout import EpisodeSpec, RolloutEngine

    oracle = vista_rl.make_model("scripted", path="oracle")
    specs = [EpisodeSpec(env_id="grounding/gui-v0", env_config={"tools": ["search_coordinate"]}, seed=seed)
             for seed in range(4)]
    with RolloutEngine(oracle, RolloutSection(max_turns=4)) as engine:
        trajectories = engine.run(specs)
    for trajectory in trajectories:
        assert trajectory.success and not trajectory.failure
        calls = [call for turn in trajectory.turns for call in turn.tool_calls]
        assert calls and all(call.name == "search_coordinate" and not call.error for call in calls)
        assert all(call.num_images == 1 for call in calls)

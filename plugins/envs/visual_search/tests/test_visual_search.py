import shutil

import numpy as np
import pytest
from vista_plugin_visual_search.scene import COLOURS, generate_scene

import vista_rl
from vista_rl import ToolContext, parse_response
from vista_rl_sdk import check_env

ENV = "visual_search/zoom-v0"


@pytest.mark.parametrize("config", [{}, {"prompt_format": "no_think", "answer_attempts": 2, "target_kinds": ["count"]}])
def test_conformance(config):
    check_env(ENV, config, seeds=(0, 1))


def test_scene_is_seeded_and_the_target_is_unique():
    a, b = generate_scene(4, kinds=("shape",)), generate_scene(4, kinds=("shape",))
    assert a.image.tobytes() == b.image.tobytes() and a.target_box == b.target_box
    pixels = np.asarray(a.image).astype(int)
    pink = (np.abs(pixels - COLOURS["pink"]).sum(axis=2) < 10)
    ys, xs = np.nonzero(pink)
    x1, y1, x2, y2 = a.target_box
    assert len(xs) > 100 and xs.min() >= x1 and xs.max() <= x2 and ys.min() >= y1 and ys.max() <= y2
    assert a.image.size == (1536, 1536)


def _drive(env, policy_turns):
    """Run scripted turns; tool calls go through vista_rl.make_tool as the rollout engine runs them."""
    observation, info = env.reset(seed=policy_turns["seed"])
    images = list(observation.images)
    result = None
    for make_response in policy_turns["turns"]:
        text = make_response(info, images)
        result = env.step(text)
        for call in parse_response(text).tool_calls:
            tool_result = vista_rl.make_tool(call.name)(call.arguments,
                                                     ToolContext(images=images, metadata=env.tool_context_metadata()))
            assert not tool_result.error, tool_result.text
            images.extend(tool_result.images)
        if result.done:
            break
    return result, images


def _zoom(info, images):
    x, y = info["target_point"]
    return (f'<think>Something small near ({x}, {y}) may be it.</think>'
            f'<tool_call>{{"name": "crop_zoom", "arguments": {{"coordinate": [{x}, {y}], "offset": 24}}}}</tool_call>')


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Tesseract")
def test_end_to_end_text_target_is_read_from_the_zoom_with_ocr():
    env = vista_rl.make_env(ENV, target_kinds=["text"])
    for seed in (1, 2, 5):
        _text_episode(env, seed)


def _text_episode(env, seed):
    state = {}

    def read(info, images):
        # find the yellow sign in the zoomed view, then OCR that region of it
        pixels = np.asarray(images[-1]).astype(int)
        ys, xs = np.nonzero(np.abs(pixels - COLOURS["yellow"]).sum(axis=2) < 60)
        region = [int(xs.min()) + 2, int(ys.min()) + 2, int(xs.max()) - 2, int(ys.max()) - 2]  # inside the border
        words = vista_rl.make_tool("ocr")({"image": -1, "mode": "line", "region": region},
                                       ToolContext(images=images)).metadata["words"]
        state["read"] = " ".join(w["text"] for w in words).lower()
        return f"<think>The zoom at {tuple(info['target_point'])} shows a sign.</think><answer>{state['read']}</answer>"

    # the low-resolution view alone is not legible
    observation, info = env.reset(seed=seed)
    x, y = info["target_point"]
    blurry = vista_rl.make_tool("ocr")({"region": [x - 30, y - 15, x + 30, y + 15], "mode": "line"},
                                    ToolContext(images=observation.images)).metadata["words"]
    assert info["answer"] not in " ".join(w["text"] for w in blurry).lower()

    result, images = _drive(env, {"seed": seed, "turns": [_zoom, read]})
    assert len(images) == 2 and images[1].size == (672, 672)
    assert state["read"] == info["answer"]
    assert result.info["success"] and result.info["grounded"] and result.reward == pytest.approx(1.5)


def test_end_to_end_colour_target_is_read_from_the_zoom_pixels():
    env = vista_rl.make_env(ENV, target_kinds=["colour"])

    def name_colour(info, images):
        # the star sits at the centre of the zoom: the palette colour most present in the central patch
        centre = np.asarray(images[-1])[300:372, 300:372].reshape(-1, 3).astype(int)
        counts = {name: int((np.abs(centre - rgb).sum(axis=1) < 40).sum()) for name, rgb in COLOURS.items()}
        colour = max(counts, key=counts.get)
        return f"<think>At ({info['target_point'][0]}, {info['target_point'][1]}) the star is {colour}.</think><answer>{colour}</answer>"

    for seed in (0, 3):
        result, _ = _drive(env, {"seed": seed, "turns": [_zoom, name_colour]})
        assert result.info["success"], result.info


def test_grounding_reward_needs_a_point_on_the_target():
    env = vista_rl.make_env(ENV)
    _, info = env.reset(seed=5)
    answer = info["answer"]
    assert env.step(f"<think>I guess.</think><answer>{answer}</answer>").reward == pytest.approx(1.0)
    env.reset(seed=5)
    x, y = info["target_point"]
    hit = env.step(f"<think>At ({x}, {y}) I see it.</think><answer>{answer}</answer>")
    assert hit.reward == pytest.approx(1.5) and hit.info["grounded"]
    env.reset(seed=5)
    miss = env.step(f"<think>At ({(x + 200) % 512}, {(y + 200) % 512}) I see it.</think><answer>{answer}</answer>")
    assert miss.reward == pytest.approx(1.0) and not miss.info["grounded"]


def test_visual_search_pays_precision_not_a_grid_of_guesses() -> None:
    """A ``<think>`` that names every place on a grid used to hit the target somewhere and earn the
    whole grounding reward; now it earns its hit rate."""
    env = vista_rl.make_env(ENV)
    _, info = env.reset(seed=5)
    grid = " ".join(f"({x}, {y})" for x in range(8, 512, 16) for y in range(8, 512, 16))
    result = env.step(f"<think>It is at one of {grid}.</think><answer>{info['answer']}</answer>")
    assert result.info["grounded"] and result.reward < 1.0 + 0.05
    env.reset(seed=5)
    x, y = info["target_point"]
    honest = env.step(f"<think>At ({x}, {y}) I see it.</think><answer>{info['answer']}</answer>")
    assert honest.reward == pytest.approx(1.5)


def test_image_and_turn_caps():
    env = vista_rl.make_env(ENV, max_images=3, max_turns=4)
    _, info = env.reset(seed=0)
    zoom = '<think>look at (10, 10)</think><tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [10, 10]}}</tool_call>'
    assert env.step(zoom).info["action_valid"]
    second = env.step(zoom)
    assert second.info["action_valid"] and not second.done
    third = env.step(zoom)
    assert not third.info["action_valid"] and "image limit" in third.observation.text and "answer now" in third.observation.text
    fourth = env.step(zoom)
    assert fourth.truncated and not fourth.info["success"]


def test_another_answer_attempt_after_a_wrong_answer():
    env = vista_rl.make_env(ENV, target_kinds=["count"], answer_attempts=2, reward_mode="decayed", decay=0.5,
                         grounding_reward=0.0)
    _, info = env.reset(seed=1)
    wrong = str(int(info["answer"]) + 1)
    first = env.step(f"<think>t</think><answer>{wrong}</answer>")
    assert not first.done and "too high" in first.observation.text and "crop_zoom" in first.observation.text
    second = env.step(f"<think>t</think><answer>{info['answer']}</answer>")
    assert second.info["success"] and second.reward == pytest.approx(0.5)


def test_env_runs_the_zoom_itself_when_asked():
    env = vista_rl.make_env(ENV, execute_tools=True)
    env.reset(seed=0)
    step = env.step(env.oracle_response())
    assert len(step.observation.images) == 1 and step.observation.images[0].size == (672, 672)
    final = env.step(env.oracle_response())
    assert final.info["success"]


def test_oracle_episodes_through_the_core_rollout_engine():
    """The engine runs crop_zoom itself (the env never sees the tool turn); the oracle still zooms
    once, then answers with a grounded point."""
    from vista_rl.rollout import RolloutEngine, episode_specs

    backend = vista_rl.make_model("scripted", path="oracle")
    with RolloutEngine(backend) as engine:
        trajectories = engine.run(episode_specs(ENV, [0, 1, 2]))
    for trajectory in trajectories:
        assert trajectory.success, trajectory.failure
        assert len(trajectory.turns) == 2
        assert [call.name for call in trajectory.turns[0].tool_calls] == ["crop_zoom"]
        assert trajectory.total_reward == pytest.approx(1.5)


def test_engine_zooms_cut_from_the_full_resolution_original():
    """The engine passes env.tool_context_metadata() to tools, so its crop equals the env's own
    full-resolution zoom (not an upscaled crop of the 512-pixel view)."""
    from vista_rl.rollout import RolloutEngine, episode_specs

    env = vista_rl.make_env(ENV, execute_tools=True)
    env.reset(seed=0)
    expected = env.step(env.oracle_response()).observation.images[0]
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle")) as engine:
        (trajectory,) = engine.run(episode_specs(ENV, [0]))
    zoomed = trajectory.turns[1].images[-1]
    assert zoomed.size == expected.size
    assert zoomed.tobytes() == expected.tobytes()

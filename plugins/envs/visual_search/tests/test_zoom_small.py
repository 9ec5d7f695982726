"""visual_search/zoom-small-v0: the answer is provably absent from the view and plainly in the zoom."""

import json

import numpy as np
import pytest
from vista_plugin_scenekit.markers import DOT_COLOURS, GREY, complement, marker_mask
from vista_plugin_visual_search.small import generate_marker_scene

import vista_rl
from vista_rl import ToolContext
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl_sdk import check_env

ENV = "visual_search/zoom-small-v0"


@pytest.mark.parametrize("config", [{}, {"tools": []}, {"grid": 3, "marker": 4, "colours": ["red", "blue"]}])
def test_conformance(config):
    check_env(ENV, config, seeds=(0, 1))


@pytest.mark.parametrize("factor, blocks", [(8, 2), (8, 6), (4, 4)])
def test_every_block_of_a_marker_is_half_dot(factor, blocks):
    mask = np.array(marker_mask(factor, blocks))
    assert mask.shape == (factor * blocks,) * 2
    per_block = mask.reshape(blocks, factor, blocks, factor).sum(axis=(1, 3))
    assert (per_block == factor * factor // 2).all()
    centre = factor * blocks // 2
    assert mask[centre, centre] and not mask[0, 0]  # the dot is in the middle, its complement outside


@pytest.mark.parametrize("grid", [2, 3])
def test_the_view_is_the_same_image_for_every_seed(grid):
    """Exactly no colour information at the shown resolution: the tools-disabled ceiling is the best
    constant answer, whatever the policy."""
    views = [np.asarray(generate_marker_scene(seed, grid=grid).shown) for seed in range(12)]
    scenes = [generate_marker_scene(seed, grid=grid) for seed in range(12)]
    assert len({tuple(scene.colours) for scene in scenes}) > 6  # the colours do differ ...
    assert all(np.array_equal(views[0], view) for view in views[1:])  # ... the views do not
    assert {tuple(p) for p in views[0].reshape(-1, 3)} <= {(GREY,) * 3, (40, 40, 40)}


def test_the_zoom_at_the_named_point_shows_the_answer_colour():
    env = vista_rl.make_env(ENV)
    tool = vista_rl.make_tool("crop_zoom")
    for seed in range(6):
        observation, info = env.reset(seed=seed)
        x, y = info["target_point"]
        assert f"({x}, {y})" in observation.text
        context = ToolContext(images=list(observation.images), metadata=env.tool_context_metadata())
        result = tool({"coordinate": [x, y], "offset": env.config.zoom_offset, "size": env.config.zoom_size},
                      context)
        assert not result.error and result.images[0].size == (224, 224)
        # Each block of the marker spans 2x2 vision patches, so some patches are pure dot colour.
        patches = np.asarray(result.images[0]).astype(float).reshape(16, 14, 16, 14, 3).mean(axis=(1, 3))
        assert np.abs(patches - DOT_COLOURS[info["answer"]]).max(axis=2).min() < 3
        pixels = {tuple(p) for p in np.asarray(result.images[0]).reshape(-1, 3)}
        answer = DOT_COLOURS[info["answer"]]
        assert answer in pixels and complement(answer) in pixels
        others = [name for name in DOT_COLOURS if name != info["answer"]]
        assert not any(DOT_COLOURS[name] in pixels for name in others)


def test_oracle_solves_it_with_the_tool_through_the_rollout_engine():
    settings = RolloutSection(max_turns=3, describe_tools=False)
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), settings) as engine:
        trajectories = engine.run(episode_specs(ENV, range(20)))
    assert all(t.success and t.failure is None for t in trajectories)
    for trajectory in trajectories:
        (call,) = trajectory.turns[0].tool_calls
        assert call.name == "crop_zoom" and call.num_images == 1 and not call.error
        assert len(trajectory.turns[1].images) == 1  # the zoom is what the answer turn sees


def test_tools_disabled_removes_the_tool_from_env_and_prompt():
    on, off = vista_rl.make_env(ENV), vista_rl.make_env(ENV, tools=[])
    assert on.tools == ("crop_zoom",) and off.tools == ()
    assert "crop_zoom" in on.system_prompt() and "crop_zoom" not in off.system_prompt()
    off.reset(seed=3)
    step = off.step('<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [19, 19]}}</tool_call>')
    assert not step.done and "offers no tools" in step.observation.text and not step.observation.images


def test_without_the_tool_a_constant_answer_scores_its_share_of_the_seeds():
    env = vista_rl.make_env(ENV, tools=[])
    answers = [env.reset(seed=seed)[1]["answer"] for seed in range(400)]
    share = answers.count("red") / len(answers)
    assert 0.18 < share < 0.32  # four colours, drawn uniformly
    with RolloutEngine(vista_rl.make_model("scripted", responses=["<answer>red</answer>"]), RolloutSection(max_turns=3)) as engine:
        trajectories = engine.run(episode_specs(ENV, range(400), env_config={"tools": []}))
    assert sum(t.success for t in trajectories) == answers.count("red")


def test_bad_config_is_a_clear_error():
    with pytest.raises(ValueError, match="marker must be even"):
        vista_rl.make_env(ENV, marker=5)
    with pytest.raises(ValueError, match="unknown colour"):
        vista_rl.make_env(ENV, colours=["red", "mauve"])
    with pytest.raises(ValueError, match="too small"):
        vista_rl.make_env(ENV, display_size=28, grid=4)


def test_the_viewer_shows_each_tool_turn_with_its_zoomed_image(tmp_path):
    from click.testing import CliRunner

    from vista_rl.cli import build_cli

    result = CliRunner().invoke(build_cli(), [
        "eval", "--env", ENV, "--model", "scripted:oracle", "--episodes", "3", "--max-turns", "3",
        "--seed", "7", "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert summary["success_rate"]["value"] == 1.0 and summary["tool_calls"] == 3
    html = (tmp_path / "eval" / "trajectories.html").read_text()
    rows = [line for line in (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines() if line]
    assert len(rows) == 3 and html.count("crop_zoom") >= 3
    for row in map(json.loads, rows):
        (zoom_ref,) = row["turns"][1]["image_refs"]  # the answer turn saw the zoom ...
        assert f'src="images/{zoom_ref}.png"' in html  # ... and the viewer shows it
        assert (tmp_path / "eval" / "images" / f"{zoom_ref}.png").is_file()

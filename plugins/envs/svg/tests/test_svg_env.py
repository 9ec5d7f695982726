import hashlib
import json
import re
import subprocess
import sys

import pytest
from vista_plugin_svg.targets import synthetic_target

import vista_rl
from vista_rl_sdk import check_env
from vista_rl_sdk.checks import ADVERSARIAL_ACTIONS

ENV_ID = "svg/reconstruct-v0"
BLANK = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"/>'


def answer(svg: str) -> str:
    return f"<think>drawing</think><answer>{svg}</answer>"


def without_last_shape(svg: str) -> str:
    """The target with its last primitive removed: a partly right answer."""
    shapes = re.findall(r"<(?:rect|circle|ellipse|polygon|line) [^>]*/>", svg)
    return svg.replace(shapes[-1], "", 1)


@pytest.mark.parametrize("config", [{"image_size": 48}, {"image_size": 48, "prompt_format": "no_think"}],
                         ids=["free_think", "no_think"])
def test_conformance(config):
    check_env(ENV_ID, config)


def test_listed_and_discovered_through_the_entry_point():
    spec = vista_rl.host().spec("envs", ENV_ID)
    assert spec.distribution == "vista-plugin-svg" and spec.version == "0.1.0"


def vista_cli(*args: str) -> str:
    code = "import sys; from vista_rl.cli.main import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                          timeout=120).stdout


def test_vista_envs_and_datasets_list_it():
    assert ENV_ID in {item["id"] for item in json.loads(vista_cli("envs", "--json"))}
    assert "svg-icons-simple" in {item["id"] for item in json.loads(vista_cli("datasets", "--json"))}


def test_reward_orders_oracle_partial_and_blank():
    env = vista_rl.make_env(ENV_ID, image_size=64, min_shapes=3, max_shapes=4)
    rewards = {}
    for name in ("oracle", "partial", "blank"):
        _, info = env.reset(seed=5)
        target = synthetic_target(5, 3, 4).svg
        svg = {"oracle": target, "partial": without_last_shape(target), "blank": BLANK}[name]
        result = env.step(answer(svg))
        assert result.info["action_valid"] and result.info["format_ok"]
        rewards[name] = result.reward
    assert rewards["oracle"] == pytest.approx(0.5 + 1.0)
    assert rewards["blank"] == pytest.approx(0.5)  # format only: an empty canvas earns no similarity
    assert rewards["blank"] < rewards["partial"] < rewards["oracle"]


def test_raw_scores_follow_vagens_formula_when_not_rescaled():
    env = vista_rl.make_env(ENV_ID, image_size=64, relative_to_blank=False, pixel_weight=0.5, ssim_weight=2.0,
                            format_reward=0.25)
    env.reset(seed=2)
    result = env.step(answer(BLANK))
    scores = result.info["scores"]
    assert scores == result.info["raw_scores"] and 0 < scores["ssim"] < 1
    assert result.reward == pytest.approx(0.25 + 0.5 * scores["pixel"] + 2.0 * scores["ssim"])


def test_multi_turn_feeds_the_render_back_and_ends_at_max_turns():
    env = vista_rl.make_env(ENV_ID, image_size=40, max_turns=3, show_target_each_turn=True)
    first, _ = env.reset(seed=1)
    red = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="#ff0000"/></svg>'
    one = env.step(answer(red))
    assert not one.done and len(one.observation.images) == 2  # the render, then the target again
    assert one.observation.images[0].getpixel((20, 20)) == (255, 0, 0)
    assert one.observation.images[1].tobytes() == first.images[0].tobytes()
    assert "Similarity to the target" in one.observation.text and one.info["turn"] == 1
    two = env.step("no tags at all")
    assert not two.done and two.reward == 0.0 and "Invalid response format" in two.observation.text
    three = env.step(answer(synthetic_target(1).svg))
    assert three.truncated and not three.terminated and three.info["success"]
    assert len(three.observation.images) == 1  # the last render, no target: the episode is over
    assert env.step(answer(red)).info["action_valid"] is False  # stepping past the end is feedback


def test_stop_on_success_terminates_early():
    env = vista_rl.make_env(ENV_ID, image_size=40, max_turns=5, stop_on_success=True)
    env.reset(seed=4)
    result = env.step(env.oracle_response())
    assert result.terminated and not result.truncated and result.info["success"]


def test_same_seed_same_pixels_different_seed_different():
    def digest(seed):
        observation, _ = vista_rl.make_env(ENV_ID, image_size=48).reset(seed=seed)
        return hashlib.sha256(observation.images[0].tobytes()).hexdigest()

    assert digest(9) == digest(9) != digest(10)
    assert synthetic_target(9).svg == synthetic_target(9).svg


@pytest.mark.parametrize("action", ADVERSARIAL_ACTIONS.values(), ids=ADVERSARIAL_ACTIONS.keys())
def test_adversarial_actions_are_feedback(action):
    env = vista_rl.make_env(ENV_ID, image_size=32)
    env.reset(seed=0)
    result = env.step(action)
    assert result.reward == 0.0 and not result.info["action_valid"] and result.observation.images == []


def test_model_text_with_image_placeholders_is_escaped():
    env = vista_rl.make_env(ENV_ID, image_size=32)
    env.reset(seed=0)
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><use href="<image>"/></svg>'
    result = env.step(answer(svg))
    assert vista_rl.count_placeholders(result.observation.text) == len(result.observation.images) == 0


@pytest.mark.parametrize("bad,key", [({"max_shapes": 0}, "max_shapes"), ({"source": "records"}, "records_path"),
                                     ({"embedding_weight": 1.0}, "encoder"), ({"primitives": ["star"]}, "primitives"),
                                     ({"colour": "red"}, "colour")])
def test_bad_config_names_the_key(bad, key):
    with pytest.raises(Exception, match=key):
        vista_rl.make_env(ENV_ID, **bad)


def test_one_shot_renderer_gives_the_same_pixels_as_the_worker():
    svg = synthetic_target(7, 2, 3).svg
    renders = {}
    for renderer in ("worker", "one_shot"):
        env = vista_rl.make_env(ENV_ID, image_size=40, renderer=renderer)
        env.reset(seed=7)
        result = env.step(answer(without_last_shape(svg)))
        renders[renderer] = result.observation.images[0].tobytes()
        env.close()
    assert renders["worker"] == renders["one_shot"]


def test_eval_through_the_shared_rollout_path_records_the_renders(tmp_path):
    from click.testing import CliRunner  # noqa: PLC0415

    from vista_rl.cli import build_cli  # noqa: PLC0415

    result = CliRunner().invoke(build_cli(), [
        "eval", "--env", ENV_ID, "--model", "scripted:oracle", "--episodes", "2", "--seed", "3",
        "--set", "env.config.image_size=48", "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert summary["success_rate"]["value"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines() if line]
    assert len(rows) == 2 and all(len(row["turns"]) == 2 for row in rows)  # VAGEN's two turns
    assert all(turn["reward"] == 1.5 for row in rows for turn in row["turns"])
    assert rows[0]["turns"][1]["image_refs"]  # the second turn saw the first turn's render

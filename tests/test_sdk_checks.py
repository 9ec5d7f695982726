"""The conformance kit must catch deliberately broken items (and pass good ones)."""

from __future__ import annotations

import os
import random
import time

import pytest
from PIL import Image

from tests.test_contracts import Zoom
from vista_rl import Env, Observation, StepResult
from vista_rl.judges import ExactMatchJudge, FormatJudge
from vista_rl_sdk import CheckFailure, check_env, check_estimator, check_judge, check_tool
from vista_rl_sdk.fresh_process import call_in_fresh_process


class GoodEnv(Env):
    def reset(self, seed=None):
        self.value = random.Random(seed).randrange(100)
        return Observation("<image> value?", [Image.new("L", (4, 4), self.value)]), {}

    def step(self, action):
        ok = action.strip() == f"<answer>{self.value}</answer>"
        return StepResult(Observation("done"), float(ok), True, False, {"success": ok, "action_valid": ok})

    def oracle_response(self):
        return f"<answer>{self.value}</answer>"


class WrongPlaceholders(GoodEnv):
    def reset(self, seed=None):
        observation, info = super().reset(seed)
        observation.text = "no placeholder here"  # mutated after construction, as buggy envs do
        return observation, info


class NonDeterministic(GoodEnv):
    def reset(self, seed=None):
        self.value = int(time.perf_counter_ns() % 100)
        return Observation("<image>", [Image.new("L", (4, 4), self.value)]), {}


class HashSeeded(GoodEnv):
    """Deterministic inside one process but not across processes (str hashing is salted)."""

    def reset(self, seed=None):
        self.value = hash(f"level-{seed}") % 100
        return Observation("<image>", [Image.new("L", (4, 4), self.value)]), {}


class RaisesOnGarbage(GoodEnv):
    def step(self, action):
        if "<answer>" not in action:
            raise ValueError("cannot parse")
        return super().step(action)


def test_good_env_passes():
    report = check_env(GoodEnv)
    assert "reset is deterministic across processes" in report.passed


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (WrongPlaceholders, "placeholder"),
        (NonDeterministic, "not deterministic"),
        (RaisesOnGarbage, "step raised on garbage"),
    ],
)
def test_broken_envs_are_caught(env, message):
    with pytest.raises(CheckFailure) as info:
        check_env(env, cross_process=False)
    assert any(message in problem for problem in info.value.problems), info.value.problems


@pytest.mark.skipif(os.environ.get("PYTHONHASHSEED") not in (None, "", "random"),
                    reason="hash randomisation disabled in this process")
def test_cross_process_nondeterminism_is_caught():
    with pytest.raises(CheckFailure, match="another process"):
        check_env(HashSeeded)


def test_fresh_process_fingerprint_helper_sets_the_hash_seed_and_reports_failures():
    """The one subprocess runner behind check_env's and game_testing's cross-process fingerprints."""
    assert call_in_fresh_process("os:getenv", "PYTHONHASHSEED", hash_seed="77") == "77"
    first, again, other = (call_in_fresh_process("builtins:hash", "level-3", hash_seed=seed)
                           for seed in ("1", "1", "2"))
    assert first == again != other
    assert call_in_fresh_process("builtins:print", "noise on stdout") is None  # printing is not the result
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        call_in_fresh_process("operator:truediv", 1, 0)


def test_check_tool():
    check_tool(Zoom(), {"x": 1, "y": 2})


def test_check_judge_catches_a_judge_that_likes_everything():
    check_judge(ExactMatchJudge(), "cat", wrong=["dog", "cats"])
    check_judge(FormatJudge(), "<think>a</think><answer>b</answer>", wrong=["<answer>b</answer>"])

    class Generous(ExactMatchJudge):
        def score(self, prediction, reference, **context):
            result = super().score(prediction, reference)
            result.score = 1.0
            return result

    with pytest.raises(CheckFailure, match="scored 1.0"):
        check_judge(Generous(), "cat", wrong=["dog"])


def test_check_estimator_catches_mask_leaks():
    torch = pytest.importorskip("torch")
    from vista_rl.estimator import AdvantageOutput

    def masked_reward_to_go(batch):
        returns = batch.token_rewards.flip(-1).cumsum(-1).flip(-1)
        return AdvantageOutput(returns * batch.advantage_mask, returns)

    def leaky(batch):
        returns = batch.token_rewards.flip(-1).cumsum(-1).flip(-1) + 1.0
        return AdvantageOutput(returns, returns)

    def wrong_shape(batch):
        return AdvantageOutput(torch.zeros(1), torch.zeros(1))

    check_estimator(masked_reward_to_go)
    with pytest.raises(CheckFailure, match="outside the advantage mask"):
        check_estimator(leaky)
    with pytest.raises(CheckFailure, match="shape"):
        check_estimator(wrong_shape)


# ---------------------------------------------------------------- what a passing check lists (issue 39)
def test_check_judge_lists_what_it_checked():
    """A judge that passes every check used to get ``passed=[]``: the report now names each check."""
    report = check_judge(ExactMatchJudge(), "cat", wrong=["dog", "cats"])
    assert report.problems == [] and len(report.passed) == 3, report.passed
    assert any("max_score" in what for what in report.passed)
    assert any("2 wrong predictions" in what for what in report.passed)
    assert any("garbage predictions" in what for what in report.passed)


def test_a_failing_judge_lists_only_what_passed():
    class Generous(ExactMatchJudge):
        def score(self, prediction, reference, **context):
            result = super().score(prediction, reference)
            result.score = 1.0
            return result

    with pytest.raises(CheckFailure) as info:
        check_judge(Generous(), "cat", wrong=["dog"])
    assert info.value.report is not None
    assert not any("wrong predictions" in what for what in info.value.report.passed)
    assert any("max_score" in what for what in info.value.report.passed)


def test_check_tool_and_check_env_list_what_they_checked():
    tool_report = check_tool(Zoom(), {"x": 1, "y": 2})
    assert len(tool_report.passed) == 5, tool_report.passed  # schema + four argument cases
    env_report = check_env(GoodEnv, cross_process=False)
    assert any("oracle action" in what for what in env_report.passed)
    assert any("garbage actions" in what for what in env_report.passed)
    assert any("close()" in what for what in env_report.passed)


# ------------------------------------------------------- content in one corner of a canvas (issue 39)
class CorneredMaze(GoodEnv):
    """The renderer bug of issue 39: a 64x64 scene pasted into the top-left of a 256x256 black canvas."""

    canvas, corner = 256, (0, 0)

    def reset(self, seed=None):
        super().reset(seed)
        scene = Image.new("RGB", (64, 64), "white")
        rng = random.Random(seed)
        for _ in range(6):
            x, y = rng.randrange(60), rng.randrange(60)
            scene.paste((0, 0, 0), (x, y, x + 4, y + 4))
        image = Image.new("RGB", (self.canvas, self.canvas), "black")
        image.paste(scene, self.corner)
        return Observation("<image> where is the exit?", [image]), {}


class CorneredBottomRight(CorneredMaze):
    corner = (192, 192)


class DotAnywhere(GoodEnv):
    """A small dot at a random place on a white canvas: sparse, but not a rendering bug."""

    def reset(self, seed=None):
        super().reset(seed)
        rng = random.Random(seed)
        image = Image.new("RGB", (128, 64), "white")
        x, y = rng.randrange(10, 110), rng.randrange(10, 50)
        image.paste((0, 0, 0), (x, y, x + 8, y + 8))
        return Observation("<image> left or right?", [image]), {}


@pytest.mark.parametrize(("env", "corner"), [(CorneredMaze, "top-left"), (CorneredBottomRight, "bottom-right")])
def test_content_in_one_corner_of_a_constant_canvas_is_a_warning(env, corner):
    from vista_rl_sdk import CheckWarning

    with pytest.warns(CheckWarning, match=corner):
        report = check_env(env, cross_process=False)
    assert report.problems == []  # a warning, not a failure
    (warning,) = report.warnings
    assert "64x64 pixels" in warning and "(0, 0, 0)" in warning and "--sheet" in warning


@pytest.mark.parametrize("env", [GoodEnv, DotAnywhere])
def test_plain_or_sparse_images_are_not_warned_about(env, recwarn):
    report = check_env(env, cross_process=False)
    assert report.warnings == [] and not recwarn.list


def test_cornered_content_needs_every_seed_and_a_constant_border():
    from vista_rl_sdk.image_checks import cornered_content, cornered_everywhere

    cornered, _ = CorneredMaze().reset(seed=1)
    noisy = cornered.images[0].copy()
    noisy.putpixel((250, 250), (1, 2, 3))  # the border is not one colour: content reaches the far corner
    assert cornered_content(cornered.images[0]) is not None
    assert cornered_content(noisy) is None
    full, _ = GoodEnv().reset(seed=1)
    assert cornered_everywhere([[cornered.images[0]], [cornered.images[0]]])
    assert cornered_everywhere([[cornered.images[0]], [noisy]]) == []
    assert cornered_everywhere([[full.images[0]]]) == []

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

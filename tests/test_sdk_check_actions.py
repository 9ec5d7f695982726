"""check_env without an oracle: each declared action is tried once, so an env whose valid actions
crash fails (issue 27: a MiniGrid bridge whose every action crashed passed the check)."""

from __future__ import annotations

import re

import pytest

from vista_rl import Env, Observation, StepResult
from vista_rl_sdk import CheckFailure, check_env

_ANSWER = re.compile(r"^<think>[^<]*</think><answer>(.*)</answer>$", re.S)


class Lamp(Env):
    """A lamp with ``on``/``off``; answers must be ``<think>..</think><answer>..</answer>``, so the
    check has to find this env's response format. No oracle."""

    action_names = ("on", "off")

    def reset(self, seed=None):
        self.lit = False
        return Observation("The lamp is off."), {}

    def _act(self, name: str) -> None:
        self.lit = name == "on"

    def step(self, action):
        match = _ANSWER.match(action.strip())
        if match is None:
            return StepResult(Observation("Bad format."), 0.0, False, False, {"format_ok": False, "action_valid": False})
        name = match.group(1).strip()
        if name not in self.action_names:
            return StepResult(Observation("No such action."), 0.0, False, False,
                              {"format_ok": True, "action_valid": False})
        self._act(name)
        return StepResult(Observation(f"The lamp is {'on' if self.lit else 'off'}."), float(self.lit), False, False,
                          {"format_ok": True, "action_valid": True, "success": self.lit})


class CrashingLamp(Lamp):
    """``off`` raises out of step, as a bridge that cannot read its env's observation does."""

    def _act(self, name: str) -> None:
        if name == "off":
            raise ValueError("The truth value of an array with more than one element is ambiguous")
        super()._act(name)


class SwallowingLamp(Lamp):
    """``on`` fails inside the env, which turns the exception into an error result (as the game kit does)."""

    def step(self, action):
        if _ANSWER.match(action.strip()) and "on" in action.split("<answer>")[1]:
            return StepResult(Observation("The environment failed."), 0.0, False, True,
                              {"format_ok": False, "action_valid": False, "error": "ValueError: ambiguous"})
        return super().step(action)


class UnknownFormatLamp(Lamp):
    action_names = ("on", "off")

    def step(self, action):
        return StepResult(Observation("?"), 0.0, False, False, {"format_ok": False, "action_valid": False})


def test_each_declared_action_is_tried_in_the_envs_own_format():
    report = check_env(Lamp, cross_process=False)
    assert any("each of the 2 declared actions was stepped" in line for line in report.passed)


@pytest.mark.parametrize(("env", "message"), [
    (CrashingLamp, r"step raised on declared 'off' action: ValueError"),
    (SwallowingLamp, r"declared 'on' action (failed inside the env|was reported as action_valid=False)"),
    (UnknownFormatLamp, r"no phrasing of the declared actions"),
])
def test_an_env_whose_valid_action_crashes_fails_the_check(env, message):
    with pytest.raises(CheckFailure, match=message):
        check_env(env, cross_process=False)


def test_an_oracle_still_decides_the_valid_step():
    class WithOracle(CrashingLamp):
        def oracle_response(self):
            return "<think>x</think><answer>on</answer>"

    report = check_env(WithOracle, cross_process=False)  # "off" is not tried: the oracle names the valid step
    assert not any("declared" in line for line in report.passed)

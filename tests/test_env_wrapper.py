"""``vista_rl.EnvWrapper``: everything goes to the inner env unless a subclass overrides it, and the
two wrappers built on it (blank images, state reward) keep the inner env's tools, prompt, oracle and
attributes."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from PIL import Image

import vista_rl
from vista_rl import EnvWrapper, Observation, StepResult
from vista_rl.baselines import BLANK_ENV_ID, BlankImagesEnv


class CountingEnv(vista_rl.Env):
    """A small real env whose every method leaves a trace."""

    tools = ("crop_zoom",)
    action_names = ("Left", "Right")

    def __init__(self, width: int = 8) -> None:
        self.width = width
        self.closed = 0
        self.steps: list[str] = []

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.seed = seed
        return Observation("<image> go", [Image.new("RGB", (self.width, 4), "red")]), {"seed": seed}

    def step(self, action: str) -> StepResult:
        self.steps.append(action)
        return StepResult(Observation(f"<image> after {action}", [Image.new("RGB", (self.width, 4), "blue")]),
                          1.0, len(self.steps) >= 2, False, {"success": action == "Right"})

    def system_prompt(self) -> str:
        return f"move {self.width}"

    def oracle_response(self) -> str | None:
        return "<answer>Right</answer>"

    def tool_context_metadata(self) -> dict[str, Any]:
        return {"full_resolution": {0: "original"}}

    def close(self) -> None:
        self.closed += 1


class DoubleReward(EnvWrapper):
    def step(self, action: str) -> StepResult:
        result = super().step(action)
        result.reward *= 2
        return result


def test_a_bare_wrapper_is_the_inner_env() -> None:
    inner = CountingEnv()
    env = EnvWrapper(inner)
    observation, info = env.reset(seed=3)
    assert (observation.text, info, inner.seed) == ("<image> go", {"seed": 3}, 3)
    assert env.step("Left").reward == 1.0 and inner.steps == ["Left"]
    assert env.system_prompt() == "move 8" and env.oracle_response() == "<answer>Right</answer>"
    assert env.tool_context_metadata() == {"full_resolution": {0: "original"}}
    assert env.tools == ("crop_zoom",)
    with env:
        pass
    assert inner.closed == 1


def test_a_subclass_changes_only_what_it_overrides() -> None:
    inner = CountingEnv(width=5)
    env = DoubleReward(DoubleReward(inner))
    env.reset(seed=0)
    assert env.step("Right").reward == 4.0
    assert env.system_prompt() == "move 5" and env.tools == ("crop_zoom",)
    assert env.unwrapped is inner and env.inner.unwrapped is inner


def test_public_attributes_read_through_private_ones_do_not() -> None:
    env = DoubleReward(CountingEnv(width=6))
    assert env.action_names == ("Left", "Right") and env.width == 6
    with pytest.raises(AttributeError, match="_secret"):
        env._secret  # noqa: B018
    with pytest.raises(AttributeError, match="no_such"):
        env.no_such  # noqa: B018
    clone = copy.deepcopy(env)  # a half-built copy looks attributes up before "inner" exists
    assert clone.width == 6 and clone.inner is not env.inner
    assert pickle.loads(pickle.dumps(env)).unwrapped.width == 6


class CountingPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/counting-v0", CountingEnv)


def test_blank_images_env_reads_through_to_the_inner_env(vista_plugin: Any) -> None:
    vista_plugin(CountingPlugin())
    blank = vista_rl.make_env(BLANK_ENV_ID, env="test/counting-v0", config={"width": 7})
    assert isinstance(blank, BlankImagesEnv) and isinstance(blank, EnvWrapper)
    observation, _ = blank.reset(seed=1)
    assert observation.images[0].size == (7, 4) and observation.images[0].getextrema() == ((0, 0),) * 3
    assert blank.step("Left").observation.images[0].getextrema() == ((0, 0),) * 3
    # what the wrapper does not change is the inner env's; the main job reads action_names this way
    assert blank.action_names == ("Left", "Right") and blank.tools == ("crop_zoom",)
    assert blank.system_prompt() == "move 7" and blank.oracle_response() == "<answer>Right</answer>"
    assert blank.tool_context_metadata() == {}  # originals would show the model what it must not see
    blank.close()
    assert blank.unwrapped.closed == 1

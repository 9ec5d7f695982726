"""Observation, Message, StepResult, Tool and config contracts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from PIL import Image
from pydantic import BaseModel, Field

from vista_rl import Message, Observation, StepResult, Tool, ToolContext, ToolResult
from vista_rl.config import RunConfig, apply_overrides, load_config
from vista_rl.env import episode_seed
from vista_rl.errors import ConfigError
from vista_rl.observation import PlaceholderMismatchError

RED = Image.new("RGB", (8, 8), "red")
BLUE = Image.new("RGB", (8, 8), "blue")


def test_placeholder_count_must_match():
    with pytest.raises(PlaceholderMismatchError, match="1 <image> placeholder"):
        Observation("look <image>", [])
    with pytest.raises(PlaceholderMismatchError):
        Observation("no placeholders", [RED])
    with pytest.raises(PlaceholderMismatchError):
        Message("user", "<image><image>", [RED])


def test_content_parts_keep_image_order():
    obs = Observation("first <image> then <image>.", [RED, BLUE])
    parts = obs.to_content_parts("hf")
    assert [p["type"] for p in parts] == ["text", "image", "text", "image", "text"]
    assert parts[1]["image"] is RED and parts[3]["image"] is BLUE
    openai = obs.to_content_parts("openai")
    assert openai[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert Message("user", "plain").to_chat() == {"role": "user", "content": "plain"}


def test_step_result_rejects_non_finite_reward():
    with pytest.raises(ValueError, match="finite"):
        StepResult(Observation("x"), math.nan, False, False)
    assert StepResult(Observation("x"), 1, True, False).done


class Zoom(Tool):
    name = "zoom"
    description = "Zoom around a point."

    class Arguments(BaseModel):
        x: int = Field(ge=0)
        y: int = Field(ge=0)

    def run(self, arguments, context: ToolContext) -> ToolResult:
        if arguments.x == 999:
            raise RuntimeError("simulated tool bug")
        return ToolResult(text=f"zoomed at {arguments.x},{arguments.y} of {len(context.images)} image(s)")


def test_tool_schema_and_bad_arguments():
    tool = Zoom()
    schema = tool.openai_schema()
    assert schema["function"]["name"] == "zoom"
    assert schema["function"]["parameters"]["required"] == ["x", "y"]
    assert tool({"x": 1, "y": 2}, ToolContext(images=[RED])).text == "zoomed at 1,2 of 1 image(s)"
    for bad, message in [("{oops", "not valid JSON"), ("[1]", "JSON object"), ({"x": -1, "y": 0}, "x:"),
                         ({"x": "a", "y": 0}, "x:"), ({}, "Field required"), ({"x": 999, "y": 1}, "simulated tool bug")]:
        result = tool(bad)
        assert result.error and message in result.text, (bad, result.text)


def test_config_overrides_and_errors(tmp_path: Path):
    path = tmp_path / "run.yaml"
    path.write_text("env: {id: oddshape/odd-colour-v0}\nrollout: {max_turns: 3}\n")
    config = load_config(RunConfig, path, ["rollout.max_turns=7", "env.config.grid=4", "rollout.sampling.stop=[x, y]"])
    assert config.rollout.max_turns == 7 and config.env.config == {"grid": 4}
    assert config.rollout.sampling.stop == ["x", "y"]
    with pytest.raises(ConfigError, match=r"rollout\.max_turnz: unknown key"):
        load_config(RunConfig, path, ["rollout.max_turnz=3"])
    with pytest.raises(ConfigError, match=r"rollout\.max_turns: Input should be greater than or equal to 1"):
        load_config(RunConfig, path, ["rollout.max_turns=0"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(RunConfig, path, ["rollout.max_turns"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(RunConfig, tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"env\.id is a str"):
        apply_overrides({"env": {"id": "x"}}, ["env.id.deeper=1"])
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(RunConfig, path)


@pytest.mark.parametrize(("seed", "expected"), [(None, 0), (7, 7), (3.0, 3), (2**40, 2**40)])
def test_episode_seed_keeps_whole_numbers(seed, expected):
    assert episode_seed(seed) == expected and type(episode_seed(seed)) is int


@pytest.mark.parametrize("seed", [1.5, float("nan"), float("inf"), True, "3", [1]])
def test_episode_seed_rejects_what_int_would_truncate_or_coerce(seed):
    with pytest.raises(ValueError, match="seed must be a whole number"):
        episode_seed(seed)


def test_run_config_rejects_a_fractional_seed():
    with pytest.raises(ConfigError, match="seed: Input should be a valid integer, got a number with a fractional"):
        load_config(RunConfig, None, overrides=["env.id=x", "seed=1.5"])

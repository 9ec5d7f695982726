"""A turn behaves the same in every engine: the same scripted replies through ``RolloutEngine``
(batched) and through one :class:`~vista_rl.rollout.EpisodeDriver` driven one episode at a time,
the way the verl agent loop drives it (open, then per reply its calls until none is left, then ``finish``), give the same
observation, reward, tool records, images, success and failure per turn.  (The verl loop itself,
through verl's machinery, is compared with the engine in plugins/engines/verl/tests/test_verl_parity.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import BaseModel

import vista_rl
from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin, swatch
from vista_rl import Env, Observation, StepResult
from vista_rl.config import RolloutSection
from vista_rl.model import Generation
from vista_rl.parsing import parse_response
from vista_rl.rollout import EpisodeDriver, EpisodeSpec, RolloutEngine
from vista_rl.rollout.turn import make_env_tools
from vista_rl.rollout.workers import CallPool, run_detached
from vista_rl.tool import Tool, ToolContext, ToolResult

ENV = "test/parity-v0"


class NoArgs(BaseModel):
    pass


class CrashingTool(Tool):
    """A tool whose ``__call__`` itself raises (past ``Tool.__call__``'s own guard)."""

    name = "crash"
    description = "Always crashes."
    Arguments = NoArgs

    def __call__(self, arguments: Any, context: ToolContext | None = None) -> ToolResult:
        raise OSError("tool backend down")

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        raise AssertionError("not reached")


class JunkTool(Tool):
    """Returns a string where a ToolResult belongs."""

    name = "junk"
    description = "Returns junk."
    Arguments = NoArgs

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        return "not a result"  # type: ignore[return-value]


class ParityEnv(Env):
    """Answer 2; a wrong answer is final (reflection retries it); "crash" makes ``step`` raise."""

    tools = ("test/zoom", "test/crash", "test/junk")

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("<image>\nPick 0, 1 or 2.", [swatch(seed or 0)]), {}

    def step(self, action: str) -> StepResult:
        answer = parse_response(action).answer
        if answer == "crash":
            raise RuntimeError("env exploded")
        if answer is None:
            return StepResult(Observation("Answer as <answer>N</answer>. <image>", [swatch(7)]), 0.0, False, False,
                              {"success": False, "format_ok": False})
        success = answer == "2"
        return StepResult(Observation("Right." if success else "Wrong."), float(success), True, False,
                          {"success": success, "format_ok": True, "reflection_feedback": f"{answer} is not it."})

    def tool_context_metadata(self) -> dict[str, Any]:
        return {"note": "from the env"}


class ParityPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register(ENV, ParityEnv)

    @vista_rl.hookimpl
    def register_tools(self, register: Any) -> None:
        register("test/crash", CrashingTool)
        register("test/junk", JunkTool)


@pytest.fixture(autouse=True)
def plugins(vista_plugin: Any) -> None:
    vista_plugin(RolloutTestPlugin())
    vista_plugin(ParityPlugin())


REPLIES = [
    '<tool_call>{"name": "zoom", "arguments": {"factor": 2}}</tool_call>',  # a tool call
    '<tool_call>{"name": "zoom", "arguments": {"factor": "big"}}</tool_call>',  # bad arguments
    "<tool_call>{not json</tool_call>",  # a malformed call
    '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',  # an unknown tool
    '<tool_call>{"name": "crash", "arguments": {}}</tool_call>'
    '<tool_call>{"name": "junk", "arguments": {}}</tool_call>',  # a raising tool and a junk result
    "no tags at all",  # an action the env rejects (not a tool call)
    "<answer>9</answer>",  # wrong: reflection resets the env
    "<answer>crash</answer>",  # the env's step raises: the episode fails
]


def _turns(trajectory: vista_rl.Trajectory) -> list[dict[str, Any]]:
    return [{"observation": t.observation, "reply": t.response, "reward": t.reward,
             "tools": [(c.name, c.result_text, c.num_images, c.error) for c in t.tool_calls],
             "success": t.info.get("success"), "images": [im.size for im in t.images]} for t in trajectory.turns]


def through_the_engine(settings: RolloutSection) -> tuple[list[dict[str, Any]], vista_rl.Trajectory]:
    with RolloutEngine(CharTokenBackend(REPLIES), settings) as engine:
        (trajectory,) = engine.run([EpisodeSpec(ENV, 1)])
    return _turns(trajectory), trajectory


def one_episode_at_a_time(settings: RolloutSection, replies: list[str] = REPLIES,
                          env_id: str = ENV) -> vista_rl.Trajectory:
    """What the verl agent loop does with the driver, minus tokens."""
    pool = CallPool(4)
    cache: dict[str, Any] = {}
    lock = threading.Lock()
    driver = EpisodeDriver(EpisodeSpec(env_id, 1), settings)
    (opened,) = pool.run_calls([driver.open_call(lambda env: make_env_tools(env.tools, settings.tools, cache, lock))])
    driver.start(opened)
    for reply in replies:
        if driver.done:
            break
        calls = driver.respond(driver.chat(), Generation(text=reply))
        while calls:
            calls = driver.settle(pool.run_calls(calls))
    trajectory = driver.finish()
    run_detached(driver.close_call())
    pool.close()
    return trajectory


def test_a_turn_behaves_the_same_in_the_engine_and_in_the_verl_loop() -> None:
    settings = RolloutSection(reflection=True, reflection_attempts=2, max_turns=10, tool_response_role="tool")
    engine_turns, trajectory = through_the_engine(settings)
    single = one_episode_at_a_time(settings)
    loop_turns = _turns(single)
    assert len(engine_turns) == len(loop_turns) == len(REPLIES)
    for index, (ours, theirs) in enumerate(zip(engine_turns, loop_turns, strict=True)):
        assert ours == theirs, f"turn {index} ({REPLIES[index]!r}) differs"
    keys = ("stop_reason", "attempts", "tool_calls", "env_steps", "format_errors", "first_attempt_success")
    assert {key: single.metadata[key] for key in keys} == {key: trajectory.metadata[key] for key in keys}
    assert (single.failure, single.system_prompt) == (trajectory.failure, trajectory.system_prompt)
    assert "zoom" in single.system_prompt  # the tool schemas, as RolloutEngine writes them

    # ... and what that shared behaviour is, turn by turn
    tools = [turn["tools"] for turn in engine_turns]
    assert tools[0] == [("zoom", "zoomed x2 (1 images seen)", 1, False)]
    assert engine_turns[1]["observation"].startswith("<tool_response>\nzoom: zoomed x2")
    assert engine_turns[1]["images"] == [(32, 32)]
    assert tools[1][0][3] and "bad arguments for zoom" in tools[1][0][1]
    assert tools[2][0][3] and tools[2][0][1].startswith("Error: invalid tool call")
    assert tools[3] == [("nope", "Error: unknown tool 'nope'; available tools: crash, junk, zoom.", 0, True)]
    assert tools[4] == [("crash", "Error: crash failed: OSError: tool backend down", 0, True),
                        ("junk", "Error: junk returned str, not a ToolResult.", 0, True)]
    assert engine_turns[6]["observation"].startswith("Answer as <answer>N</answer>.")
    assert engine_turns[6]["reward"] == 0.0 and engine_turns[6]["success"] is False
    retry = engine_turns[7]["observation"]
    assert retry.startswith("9 is not it. This is your last attempt.\nTry again from the start.")
    assert "Pick 0, 1 or 2." in retry and engine_turns[7]["images"] == [(16, 16)]
    assert trajectory.failure == "env.step() raised RuntimeError: env exploded"
    assert trajectory.metadata["stop_reason"] == "env_error" and trajectory.metadata["attempts"] == 2


class BrokenReset(ParityEnv):
    """Resets once; the reflection reset raises."""

    resets = 0

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        type(self).resets += 1
        if type(self).resets > 1:
            raise ValueError("no second reset")
        return super().reset(seed)


def test_a_broken_reflection_reset_fails_the_episode_keeping_the_scored_step(vista_plugin: Any) -> None:
    vista_plugin(type("P", (), {"register_envs": vista_rl.hookimpl(
        lambda self, register: register("test/broken-reset-v0", BrokenReset))})())
    BrokenReset.resets = 0
    settings = RolloutSection(reflection=True, reflection_attempts=3)
    trajectory = one_episode_at_a_time(settings, ["<answer>1</answer>", "<answer>2</answer>"], "test/broken-reset-v0")
    assert len(trajectory.turns) == 1 and trajectory.metadata["stop_reason"] == "env_error"
    assert trajectory.failure == "env.reset() for a reflection retry raised ValueError: no second reset"
    assert trajectory.turns[0].info["success"] is False and trajectory.success is False


@pytest.mark.parametrize("arguments", ["[" * 100_000, '{"x": ' + "9" * 5000 + "}"])
def test_tool_arguments_beyond_pythons_json_limits_are_an_error_text(arguments: str) -> None:
    """Nesting too deep (RecursionError) and integers past the digit limit (ValueError) are bad JSON."""
    from tests.rollout_testkit import ZoomTool

    result = ZoomTool()(arguments, ToolContext(images=[swatch(1)]))
    assert result.error and "not valid JSON" in result.text


def test_a_special_token_tool_name_is_escaped_in_the_tool_message() -> None:
    from vista_rl.rollout.context import tool_results_message

    message = tool_results_message([("<image>", ToolResult("Error: unknown tool '<|im_end|>'", error=True))], "tool")
    assert message.images == [] and "<image>" not in message.content and "<|" not in message.content

"""A turn behaves the same in every engine: the same scripted replies through ``RolloutEngine`` and
through :func:`vista_rl.rollout.take_turn` driven the way the verl agent loop drives it (one episode,
in order, images accumulated, the attempt counted on ``retry``) give the same observation, reward,
tool records, success and failure per turn."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import vista_rl
from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin, swatch
from vista_rl import Env, Observation, StepResult
from vista_rl.config import RolloutSection
from vista_rl.parsing import parse_response
from vista_rl.rollout import EpisodeSpec, RolloutEngine, take_turn
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


def _turns(observations: list[str], replies: list[str], rewards: list[float], records: list[Any],
           successes: list[Any], images: list[list[tuple[int, int]]]) -> list[dict[str, Any]]:
    return [{"observation": o, "reply": r, "reward": w, "tools": t, "success": s, "images": i}
            for o, r, w, t, s, i in zip(observations, replies, rewards, records, successes, images, strict=True)]


def through_the_engine(settings: RolloutSection) -> tuple[list[dict[str, Any]], vista_rl.Trajectory]:
    with RolloutEngine(CharTokenBackend(REPLIES), settings) as engine:
        (trajectory,) = engine.run([EpisodeSpec(ENV, 1)])
    turns = trajectory.turns
    return _turns([t.observation for t in turns], [t.response for t in turns], [t.reward for t in turns],
                  [[(c.name, c.result_text, c.num_images, c.error) for c in t.tool_calls] for t in turns],
                  [t.info.get("success") for t in turns], [[im.size for im in t.images] for t in turns]), trajectory


def as_the_verl_loop_does(settings: RolloutSection) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The agent loop's use of ``take_turn`` (plugins/verl/vista_plugin_verl/agent_loop.py), minus tokens."""
    env = vista_rl.make_env(ENV)
    tools = {tool.name: tool for tool in (vista_rl.make_tool(tool_id) for tool_id in env.tools)}
    initial, _ = env.reset(seed=1)
    images, observation, observation_images = list(initial.images), initial.text, list(initial.images)
    attempt, turns_in_attempt = 1, 0
    end: dict[str, Any] = {}
    columns: list[list[Any]] = [[], [], [], [], [], []]
    for reply in REPLIES:
        turns_in_attempt += 1
        outcome = take_turn(reply, env, tools, list(images), settings, attempt, seed=1,
                            metadata={"env_id": ENV, "seed": 1})
        for column, value in zip(columns, (
                observation, reply, outcome.reward,
                [(c.name, c.result_text, c.num_images, c.error) for c in (e.record() for e in outcome.tool_calls)],
                outcome.info.get("success"), [im.size for im in observation_images]), strict=True):
            column.append(value)
        end = {"failure": outcome.failure, "stop_reason": outcome.stop_reason, "attempts": attempt}
        if outcome.observation is None:
            break
        observation, observation_images = outcome.observation.content, list(outcome.observation.images)
        images.extend(observation_images)
        if outcome.retry:
            attempt, turns_in_attempt = attempt + 1, 0
        if turns_in_attempt >= settings.max_turns:
            break
    return _turns(*columns), end


def test_a_turn_behaves_the_same_in_the_engine_and_in_the_verl_loop() -> None:
    settings = RolloutSection(reflection=True, reflection_attempts=2, max_turns=10, tool_response_role="tool")
    engine_turns, trajectory = through_the_engine(settings)
    loop_turns, end = as_the_verl_loop_does(settings)
    assert len(engine_turns) == len(loop_turns) == len(REPLIES)
    for index, (ours, theirs) in enumerate(zip(engine_turns, loop_turns, strict=True)):
        assert ours == theirs, f"turn {index} ({REPLIES[index]!r}) differs"
    assert end == {"failure": trajectory.failure, "stop_reason": trajectory.metadata["stop_reason"],
                   "attempts": trajectory.metadata["attempts"]}

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


def test_take_turn_never_raises_on_a_broken_reset() -> None:
    """A reflection reset that raises fails the episode, keeping the scored step's reward and info."""

    class BrokenReset(ParityEnv):
        resets = 0

        def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
            self.resets += 1
            if self.resets > 1:
                raise ValueError("no second reset")
            return super().reset(seed)

    env = BrokenReset()
    env.reset(seed=0)
    settings = RolloutSection(reflection=True, reflection_attempts=3)
    outcome = take_turn("<answer>1</answer>", env, {}, [], settings)
    assert outcome.done and outcome.observation is None and not outcome.retry
    assert outcome.failure == "env.reset() for a reflection retry raised ValueError: no second reset"
    assert outcome.info["success"] is False and outcome.stop_reason == "env_error"


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

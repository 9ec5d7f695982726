"""The rollout engine guards every call it makes (env reset/step and their results, tools and their
results, judges inside envs, the response parser, the backend): one bad output, env, tool or judge
fails that episode, with the error recorded, and never the batch."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import vista_rl
from tests.rollout_testkit import CharTokenBackend, CounterEnv, RolloutTestPlugin
from vista_rl import Observation, StepResult
from vista_rl.config import RolloutSection
from vista_rl.judge import Judge, JudgeResult
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat
from vista_rl.parsing import parse_response
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl.tool import Tool, ToolContext, ToolResult


class BadResultEnv(CounterEnv):
    """Seed 1: step returns text where an Observation belongs; seed 2: info is not a mapping."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.seed = seed
        return super().reset(seed)

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if self.seed == 1:
            return StepResult("not an observation", 0.0, False, False, {})  # type: ignore[arg-type]
        if self.seed == 2:
            return StepResult(result.observation, 0.0, False, False, None)  # type: ignore[arg-type]
        return result


class NoPromptEnv(CounterEnv):
    def system_prompt(self) -> Any:
        return None


class PickyJudge(Judge):
    """A judge with a bug: it raises on the answer "boom"."""

    def score(self, prediction: str, reference: Any, **context: Any) -> JudgeResult:
        if prediction == "boom":
            raise ZeroDivisionError("judge bug")
        return JudgeResult(float(prediction == reference), {})


class JudgedEnv(CounterEnv):
    """One question, judged by the registered ``test/picky`` judge inside ``step``."""

    def step(self, action: str) -> StepResult:
        answer = parse_response(action).answer or ""
        verdict = vista_rl.make_judge("test/picky")(answer, "inc")
        return StepResult(Observation("Done."), verdict.score, True, False, {"success": verdict.score == 1.0})


class SchemaArgs(BaseModel):
    x: int = 0


class BrokenSchemaTool(Tool):
    """A tool whose schema cannot be built."""

    name = "broken_schema"
    description = "ok"
    Arguments = SchemaArgs

    def openai_schema(self) -> dict[str, Any]:
        raise RuntimeError("schema bug")

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        return ToolResult(text="never")


class ImagelessTool(Tool):
    """Returns "images" that are not images."""

    name = "imageless"
    description = "Returns junk images."
    Arguments = SchemaArgs

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        return ToolResult(text="here", images=["not an image"])  # type: ignore[list-item]


class BrokenSchemaEnv(CounterEnv):
    tools = ("test/broken-schema",)


class ImagelessToolEnv(CounterEnv):
    tools = ("test/imageless",)


class GuardPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/bad-result-v0", BadResultEnv)
        register("test/no-prompt-v0", NoPromptEnv)
        register("test/judged-v0", JudgedEnv)
        register("test/broken-schema-v0", BrokenSchemaEnv)
        register("test/imageless-v0", ImagelessToolEnv)

    @vista_rl.hookimpl
    def register_tools(self, register: Any) -> None:
        register("test/broken-schema", BrokenSchemaTool)
        register("test/imageless", ImagelessTool)

    @vista_rl.hookimpl
    def register_judges(self, register: Any) -> None:
        register("test/picky", PickyJudge)


@pytest.fixture(autouse=True)
def plugins(vista_plugin: Any) -> None:
    vista_plugin(RolloutTestPlugin())
    vista_plugin(GuardPlugin())


def run(backend: ModelBackend, specs: Any, **settings: Any) -> list[vista_rl.Trajectory]:
    with RolloutEngine(backend, RolloutSection(**settings)) as engine:
        return engine.run(specs)


def test_unusable_step_results_fail_their_episode_only() -> None:
    trajectories = run(CharTokenBackend(oracle=True), episode_specs("test/bad-result-v0", [0, 1, 2]))
    good, no_observation, no_info = trajectories
    assert good.success and good.failure is None
    assert no_observation.metadata["stop_reason"] == "env_error"
    assert "env.step() returned an unusable result" in (no_observation.failure or "")
    assert no_info.metadata["stop_reason"] == "env_error" and "TypeError" in (no_info.failure or "")


def test_a_judge_that_raises_inside_step_fails_that_episode_only() -> None:
    backend = CharTokenBackend(responses=["<answer>boom</answer>", "<answer>inc</answer>"])
    bad, good = run(backend, episode_specs("test/judged-v0", [0, 1]))
    assert "ZeroDivisionError: judge bug" in (bad.failure or "") and bad.metadata["stop_reason"] == "env_error"
    assert good.success and good.failure is None


def test_a_parser_failure_is_recorded_on_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser is total (fuzzed elsewhere); this fake regression checks the engine's guard."""
    import vista_rl.rollout.turn as turn_module

    def broken_parser(text: object, response_format: Any = None) -> Any:
        if "boom" in str(text):
            raise RecursionError("parser regression")
        return parse_response(text, response_format)

    monkeypatch.setattr(turn_module, "parse_response", broken_parser)
    backend = CharTokenBackend(responses=["boom <answer>inc</answer>", "<answer>inc</answer>"])
    bad, good = run(backend, episode_specs("test/tool-counter-v0", [0, 1], env_config={"target": 1}))
    assert bad.turns[0].error == "parse_response raised RecursionError: parser regression"
    assert bad.success and bad.failure is None  # the response still went to the env
    assert good.success and good.turns[0].error is None


def test_a_backend_may_fail_one_chat_alone() -> None:
    class HalfBroken(ModelBackend):
        def generate(self, chats: list[Chat], params: SamplingParams) -> Any:
            return [ValueError("prompt too long") if index == 0 else [Generation("<answer>inc</answer>")]
                    for index in range(len(chats))]

    bad, good = run(HalfBroken(), episode_specs("test/counter-v0", [0, 1], env_config={"target": 1}))
    assert bad.metadata["stop_reason"] == "model_error"
    assert bad.failure == "model backend raised ValueError: prompt too long"
    assert good.success and good.failure is None


def test_a_chat_that_breaks_the_batched_call_fails_alone() -> None:
    """A backend whose batched call fails because of one chat (as a server rejecting one malformed
    request fails the batch) is called again chat by chat: only that chat's episode fails."""
    class OnePoisonsAll(ModelBackend):
        def __init__(self) -> None:
            self.calls: list[int] = []

        def generate(self, chats: list[Chat], params: SamplingParams) -> Any:
            self.calls.append(len(chats))
            if any("Guess" in message.content for chat in chats for message in chat):
                raise ValueError("malformed request in batch")
            return [[Generation("<answer>inc</answer>")] for _ in chats]

    backend = OnePoisonsAll()
    specs = (episode_specs("test/counter-v0", [0], env_config={"target": 1}) + episode_specs("test/guess-v0", [1])
             + episode_specs("test/counter-v0", [2], env_config={"target": 1}))
    first, poisoned, last = run(backend, specs)
    assert backend.calls == [3, 1, 1, 1]
    assert first.success and last.success and first.failure is None and last.failure is None
    assert poisoned.failure == "model backend raised ValueError: malformed request in batch"


def test_broken_tools_and_prompts_fail_their_episodes_only() -> None:
    specs = (episode_specs("test/broken-schema-v0", [0]) + episode_specs("test/imageless-v0", [0])
             + episode_specs("test/no-prompt-v0", [0]))
    backend = CharTokenBackend(responses=['<tool_call>{"name": "imageless", "arguments": {}}</tool_call>',
                                          "<answer>inc</answer>"])
    schema, imageless, no_prompt = run(backend, specs)
    assert schema.metadata["stop_reason"] == "env_error" and "schema bug" in (schema.failure or "")
    # a tool result with junk images is an error result the model reads, as in every engine
    assert imageless.failure is None and imageless.turns[0].tool_calls[0].error
    assert "Error: imageless returned images that are not images." in imageless.turns[1].observation
    assert no_prompt.failure is None and no_prompt.system_prompt == ""

"""The episode driver does no I/O (issue 34 item 1): it returns the env and tool calls it needs as data
(:class:`~vista_rl.rollout.calls.Call`) and takes their outcomes, so a whole episode (tools, a tool
timeout, an env step timeout, a crashing env, a reflection reset) runs here with no thread and no event
loop: the test runs each call itself, in this thread, or hands in a timeout for a call it never ran."""

from __future__ import annotations

import ast
import inspect
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import vista_rl
from tests.rollout_testkit import RolloutTestPlugin, swatch
from vista_rl import Env, Observation, StepResult
from vista_rl.config import RolloutSection
from vista_rl.model import Generation
from vista_rl.parsing import parse_response
from vista_rl.rollout import episode as episode_module
from vista_rl.rollout.calls import Call, CallKind, CallOutcome, run_here
from vista_rl.rollout.episode import EpisodeDriver, EpisodeSpec, Phase
from vista_rl.rollout.stats import EpisodeStats
from vista_rl.rollout.turn import make_env_tools
from vista_rl.trajectory import ToolCallRecord

ENV = "test/ledger-v0"
ZOOM = '<tool_call>{"name": "zoom", "arguments": {"factor": 2}}</tool_call>'
HANG = '<tool_call>{"name": "hang", "arguments": {}}</tool_call>'
UNKNOWN = '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
SETTINGS = RolloutSection(reflection=True, reflection_attempts=2, max_turns=6, env_timeout_s=7.0, tool_timeout_s=3.0)


class LedgerEnv(Env):
    """Answer 2 (a wrong answer is final, so reflection resets); ``crash`` makes ``step`` raise.
    Writes down every call it gets and the thread it got it on."""

    tools = ("test/zoom", "test/hang")
    log: list[tuple[str, int]] = []

    def _note(self, what: str) -> None:
        type(self).log.append((what, threading.get_ident()))

    def system_prompt(self) -> str:
        return "Answer 0, 1 or 2 as <answer>N</answer>."

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self._note("reset")
        return Observation("<image>\nPick one.", [swatch(seed or 0)]), {"seed": seed}

    def step(self, action: str) -> StepResult:
        self._note("step")
        answer = parse_response(action).answer
        if answer == "crash":
            raise RuntimeError("ledger env exploded")
        success = answer == "2"
        return StepResult(Observation("Right." if success else "Wrong."), float(success), True, False,
                          {"success": success, "format_ok": answer is not None,
                           "reflection_feedback": f"{answer} is not it."})

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        self._note(f"observe {[call.name for call in calls]}")

    def close(self) -> None:
        self._note("close")


class LedgerPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register(ENV, LedgerEnv)


@pytest.fixture(autouse=True)
def plugins(vista_plugin: Any) -> None:
    vista_plugin(RolloutTestPlugin())
    vista_plugin(LedgerPlugin())
    LedgerEnv.log = []


def _tools_for(env: Env) -> dict[str, Any]:
    return make_env_tools(env.tools, SETTINGS.tools, {}, threading.Lock())


def started(settings: RolloutSection = SETTINGS) -> EpisodeDriver:
    driver = EpisodeDriver(EpisodeSpec(ENV, 1), settings)
    call = driver.open_call(_tools_for)
    assert (call.kind, call.timeout_s, driver.phase) == (CallKind.OPEN, settings.env_timeout_s, Phase.OPENING)
    driver.start(run_here(call))
    assert driver.phase is Phase.READY and not driver.done
    return driver


def reply(driver: EpisodeDriver, text: str) -> tuple[Call, ...]:
    return driver.respond(driver.chat(), Generation(text=text))


def test_a_whole_episode_runs_on_calls_the_test_runs_itself() -> None:
    threads_before = set(threading.enumerate())
    driver = started()

    # a tool turn: the unknown tool is rejected without a call; the env is then shown the turn
    (tool,) = reply(driver, ZOOM + UNKNOWN)
    assert (tool.kind, tool.label, tool.timeout_s) == (CallKind.TOOL, "tool zoom", SETTINGS.tool_timeout_s)
    assert driver.phase is Phase.ACTING and driver.tool_calls_asked == 2
    (observe,) = driver.settle([run_here(tool)])
    assert (observe.kind, observe.timeout_s, driver.phase) == (CallKind.OBSERVE, SETTINGS.env_timeout_s, Phase.OBSERVING)
    assert driver.settle([run_here(observe)]) == () and driver.phase is Phase.READY
    records = driver.trajectory.turns[0].tool_calls
    assert [(record.name, record.error) for record in records] == [("zoom", False), ("nope", True)]
    assert driver.chat()[-1].content.startswith("<tool_response>\nzoom: zoomed x2")

    # a wrong final answer: the step, then the reflection reset, then the model is told
    (step,) = reply(driver, "<answer>1</answer>")
    assert (step.kind, step.label, step.args) == (CallKind.STEP, "env.step()", ("<answer>1</answer>",))
    (reset,) = driver.settle([run_here(step)])
    assert reset.kind is CallKind.RESET and driver.phase is Phase.RESETTING
    assert driver.settle([run_here(reset)]) == () and driver.phase is Phase.READY
    assert driver.chat()[-1].content.startswith("1 is not it.")

    (step,) = reply(driver, "<answer>2</answer>")
    assert driver.settle([run_here(step)]) == ()
    assert driver.done and driver.stop_reason == "done" and driver.trajectory.success

    trajectory = driver.finish()
    stats = EpisodeStats.from_metadata(trajectory.metadata)
    assert (stats.stop_reason, stats.attempts, stats.env_steps, stats.tool_calls) == ("done", 2, 2, 2)
    assert stats.first_attempt_success is False and stats.cut_off is False and stats.episode_index == 0
    close = driver.close_call()
    assert close is not None and close.kind is CallKind.CLOSE and close.timeout_s is None
    run_here(close)

    # every env call ran here, in this thread, and no thread was started
    assert [what for what, _ in LedgerEnv.log] == ["reset", "observe ['zoom', 'nope']", "step", "reset", "step", "close"]
    assert {thread for _, thread in LedgerEnv.log} == {threading.get_ident()}
    assert set(threading.enumerate()) == threads_before


def test_a_tool_timeout_ends_the_episode_and_keeps_the_other_tools_results() -> None:
    driver = started()
    hang, zoom = reply(driver, HANG + ZOOM)
    assert [call.label for call in (hang, zoom)] == ["tool hang", "tool zoom"]
    assert driver.settle([CallOutcome(timed_out=True, seconds=3.0), run_here(zoom)]) == ()
    assert driver.done and driver.stop_reason == "tool_timeout"
    assert driver.trajectory.failure == "tool hang timed out after 3s"
    assert [record.name for record in driver.trajectory.turns[0].tool_calls] == ["zoom"]
    trajectory = driver.finish()
    assert trajectory.metadata["stop_reason"] == "tool_timeout" and trajectory.metadata["tool_calls"] == 1
    assert driver.close_call() is not None  # the env itself did not hang: it is closed
    assert "observe" not in " ".join(what for what, _ in LedgerEnv.log)  # a failed turn is not shown to the env


def test_an_env_step_timeout_ends_the_episode_and_leaves_the_hung_env_unclosed() -> None:
    driver = started()
    (step,) = reply(driver, "<answer>2</answer>")
    assert driver.settle([CallOutcome(timed_out=True)]) == ()
    assert driver.stop_reason == "env_timeout" and driver.trajectory.failure == "env.step() timed out after 7s"
    assert driver.finish().metadata["env_steps"] == 0
    assert driver.close_call() is None  # close() of an env that hangs would hang too
    assert [what for what, _ in LedgerEnv.log] == ["reset"]  # the step was never run


def test_a_crashing_env_fails_its_episode_at_the_step_and_at_the_start() -> None:
    driver = started()
    (step,) = reply(driver, "<answer>crash</answer>")
    assert driver.settle([run_here(step)]) == ()
    assert driver.stop_reason == "env_error"
    assert driver.trajectory.failure == "env.step() raised RuntimeError: ledger env exploded"

    broken = EpisodeDriver(EpisodeSpec(ENV, 1), SETTINGS)
    broken.open_call(_tools_for)
    broken.start(CallOutcome(error=OSError("no display")))
    assert broken.done and broken.stop_reason == "env_error"
    assert broken.trajectory.failure == (f"starting env {ENV} (make, reset, system_prompt, turn_limit) raised "
                                         "OSError: no display")
    assert broken.close_call() is None and broken.finish().metadata["env_turn_limit"] is None


def test_budgets_end_the_turn_and_a_model_error_ends_the_episode() -> None:
    driver = started(RolloutSection(max_turns=1))
    (tool,) = reply(driver, ZOOM)
    (observe,) = driver.settle([run_here(tool)])
    assert driver.settle([run_here(observe)]) == ()
    assert driver.stop_reason == "max_turns" and driver.finish().metadata["cut_off"] is True

    driver = started()
    driver.fail("model backend raised ValueError: bad prompt", "model_error")
    driver.end("response_length")  # the first end wins
    assert (driver.stop_reason, driver.trajectory.failure) == ("model_error", "model backend raised ValueError: bad prompt")


def test_the_protocol_is_checked() -> None:
    driver = EpisodeDriver(EpisodeSpec(ENV, 1), SETTINGS)
    with pytest.raises(RuntimeError, match=r"respond\(\) in phase new; it needs ready"):
        reply(driver, "<answer>2</answer>")
    driver = started()
    reply(driver, HANG + ZOOM)
    with pytest.raises(RuntimeError, match=r"settle\(\) got 1 outcome\(s\) for the calls \['tool hang', 'tool zoom'\]"):
        driver.settle([CallOutcome(value=None)])
    driver.finish()
    with pytest.raises(RuntimeError, match="finish.. twice"):
        driver.finish()


def test_no_driver_method_takes_a_pool_and_the_module_does_no_io() -> None:
    """The old driver took a thread pool in eight methods and started the close thread itself."""
    for name, method in inspect.getmembers(EpisodeDriver, inspect.isfunction):
        parameters = inspect.signature(method).parameters.values()
        assert not [p.name for p in parameters if "pool" in p.name.lower() or "Pool" in str(p.annotation)], name
    tree = ast.parse(Path(episode_module.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"threading", "asyncio", "queue", "concurrent.futures", "vista_rl.rollout.workers"}

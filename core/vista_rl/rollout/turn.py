"""What happens to one model reply, shared by every engine: tools, env step, reflection.

A reply either calls tools (the env's tools, parsed from ``<tool_call>`` blocks) or is an action
for ``env.step``.  The rules for both, and for engine-side reflection (docs/reflection.md), live
here as pure pieces that :class:`~vista_rl.rollout.episode.EpisodeDriver` (the one episode driver
``RolloutEngine`` and the verl agent loop both use) calls around its pooled, timed-out calls:

- every tool call is guarded: too many calls, an invalid call, an unknown tool, a tool that raises
  or returns something other than a usable :class:`~vista_rl.tool.ToolResult` all become an error
  text in the tool observation, never an exception;
- a crashing ``env.step`` (or one that returns an unusable result) ends the episode as failed with
  the error recorded in :attr:`TurnOutcome.failure`;
- a wrong final answer with reflection on and tries left asks for a reset to the same seed
  (:attr:`TurnOutcome.retry`), after which :func:`reflection_message` is the next prompt.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image

import vista_rl
from vista_rl.config import RolloutSection, ToolOverride
from vista_rl.env import Env, StepResult
from vista_rl.observation import Message, Observation, escape_placeholders
from vista_rl.parsing import ParsedToolCall, ResponseFormat, parse_response
from vista_rl.rollout.context import tool_results_message
from vista_rl.tool import Tool, ToolContext, ToolResult
from vista_rl.trajectory import ToolCallRecord

MAX_TOOL_CALLS_PER_TURN = 8
_TOOL_FORMAT = ResponseFormat(required=())


# ------------------------------------------------------------------------------ tools
@dataclass(frozen=True)
class ToolExecution:
    """One tool call of a reply and its result (always a usable ``ToolResult``)."""

    name: str
    arguments: dict[str, Any] | None
    result: ToolResult

    def record(self) -> ToolCallRecord:
        return ToolCallRecord(name=self.name, arguments=self.arguments, result_text=self.result.text,
                              num_images=len(self.result.images), error=self.result.error)


def make_env_tools(tool_ids: Sequence[str], overrides: Mapping[str, ToolOverride],
                   cache: dict[str, Tool], lock: threading.Lock) -> dict[str, Tool]:
    """The tools an env offers, by tool name, each made once per ``cache`` (so a tool holding
    weights loads them once per engine or worker).  ``overrides`` is ``rollout.tools``: an entry
    makes ``use`` (default: the same id) with ``config`` instead of the plain id."""
    tools: dict[str, Tool] = {}
    for tool_id in tool_ids:
        with lock:
            if tool_id not in cache:
                override = overrides.get(tool_id)
                cache[tool_id] = (vista_rl.make_tool(override.use or tool_id, **override.config)
                                  if override is not None else vista_rl.make_tool(tool_id))
            tool = cache[tool_id]
        tools[tool.name or tool_id] = tool
    return tools


def parse_tool_calls(reply: str, tools: Mapping[str, Tool]) -> tuple[list[ParsedToolCall], str | None]:
    """The reply's tool calls (none when the env has no tools: then the reply is an action), and
    an error text if the parser itself failed (it is total; this guards a regression)."""
    if not tools:
        return [], None
    try:
        return list(parse_response(reply, _TOOL_FORMAT).tool_calls), None
    except Exception as exc:  # noqa: BLE001 - recorded on the turn, the reply then counts as an action
        return [], f"parse_response raised {type(exc).__name__}: {exc}"


def rejected_tool_call(call: ParsedToolCall, index: int, tools: Mapping[str, Tool]) -> ToolResult | None:
    """The error result for a call that must not run (over the per-turn limit, malformed, unknown
    tool), or ``None`` when ``tools[call.name]`` may run it."""
    if index >= MAX_TOOL_CALLS_PER_TURN:
        return ToolResult(f"Error: at most {MAX_TOOL_CALLS_PER_TURN} tool calls per turn.", error=True)
    if call.error is not None:
        return ToolResult(f"Error: invalid tool call: {call.error}", error=True)
    if call.name not in tools:
        known = ", ".join(sorted(tools))
        return ToolResult(f"Error: unknown tool {call.name!r}; available tools: {known}.", error=True)
    return None


def checked_tool_result(name: str, value: Any) -> ToolResult:
    """What a tool call gave (a result or the exception it raised) as a usable ``ToolResult``:
    anything else becomes an error result that tells the model what went wrong."""
    if isinstance(value, BaseException):
        return ToolResult(f"Error: {name} failed: {type(value).__name__}: {value}", error=True)
    if not isinstance(value, ToolResult):
        return ToolResult(f"Error: {name} returned {type(value).__name__}, not a ToolResult.", error=True)
    images = value.images
    if not isinstance(images, (list, tuple)) or not all(isinstance(image, Image.Image) for image in images):
        return ToolResult(f"Error: {name} returned images that are not images.", error=True)
    text = value.text if isinstance(value.text, str) else str(value.text)
    metadata = value.metadata if isinstance(value.metadata, dict) else {}
    return ToolResult(text=text, images=list(images), error=bool(value.error), metadata=metadata)


def tool_context(env: Env | None, images: Sequence[Image.Image],
                 metadata: Mapping[str, Any] | None = None) -> ToolContext:
    """The context tools see: every image so far, ``metadata`` and the env's
    ``tool_context_metadata()`` (a buggy env's error is recorded there, not raised)."""
    merged: dict[str, Any] = dict(metadata or {})
    if env is not None:
        try:
            merged.update(env.tool_context_metadata())
        except Exception as exc:  # noqa: BLE001 - a buggy env must not take the turn down
            merged["tool_context_error"] = f"{type(exc).__name__}: {exc}"
    return ToolContext(images=list(images), metadata=merged)


def execute_tool_calls(calls: Sequence[ParsedToolCall], tools: Mapping[str, Tool],
                       context: ToolContext) -> list[ToolExecution]:
    """Run a reply's tool calls one after another in this thread; never raises."""
    executions = []
    for index, call in enumerate(calls):
        name = call.name or "?"
        result = rejected_tool_call(call, index, tools)
        if result is None:
            try:
                value: Any = tools[str(call.name)](call.arguments, context)
            except Exception as exc:  # noqa: BLE001 - Tool.__call__ catches run(); this guards overrides
                value = exc
            result = checked_tool_result(name, value)
        executions.append(ToolExecution(name, call.arguments if call.error is None else None, result))
    return executions


# ------------------------------------------------------------------------- outcomes
@dataclass
class TurnOutcome:
    """What one reply led to.

    ``observation`` is the message to feed back (role ``tool``/``user``), or ``None`` when the
    episode ends or waits for a reflection reset (``retry``).  ``failure`` is set when the env
    failed; then ``done`` is true and ``stop_reason`` says how (``env_error``).
    """

    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    observation: Message | None = None
    tool_calls: list[ToolExecution] = field(default_factory=list)
    failure: str | None = None
    stop_reason: str = ""
    retry: bool = False
    final_observation: str | None = None
    error: str | None = None  # a non-fatal problem recorded on the turn (e.g. the parser failed)

    @property
    def success(self) -> bool | None:
        value = self.info.get("success")
        return None if value is None else bool(value)

    @property
    def role(self) -> str | None:
        return self.observation.role if self.observation is not None else None


def failed(reason: str, stop_reason: str = "env_error") -> TurnOutcome:
    return TurnOutcome(done=True, failure=reason, stop_reason=stop_reason)


def tool_outcome(executions: list[ToolExecution], role: Literal["user", "tool"]) -> TurnOutcome:
    """A tool turn: reward 0, the results as one message (see ``tool_results_message``)."""
    results = [(execution.name, execution.result) for execution in executions]
    try:
        message = tool_results_message(results, role)
    except Exception as exc:  # noqa: BLE001 - checked results should not get here; never raise
        names = ", ".join(name for name, _ in results)
        return failed(f"tool result of {names} is unusable: {type(exc).__name__}: {exc}", "tool_error")
    return TurnOutcome(observation=message, tool_calls=executions, info={"tool_call": True})


def wants_reflection(result: StepResult, settings: RolloutSection, attempt: int) -> bool:
    """Engine-side reflection: a terminated, unsuccessful, retryable episode with tries left."""
    return bool(settings.reflection and result.terminated and result.info.get("success") is False
                and result.info.get("retryable", True) and attempt < settings.reflection_attempts)


def step_outcome(result: Any, settings: RolloutSection, attempt: int) -> TurnOutcome:
    """What ``env.step`` returned, as a turn outcome (an unusable result fails the episode)."""
    if not isinstance(result, StepResult):
        return failed(f"env.step() returned {type(result).__name__}, not a StepResult")
    try:
        info = dict(result.info)
        outcome = TurnOutcome(reward=float(result.reward), info=info)
        if not result.done:
            outcome.observation = Message.from_observation(result.observation)
            return outcome
        outcome.final_observation = result.observation.text
        outcome.retry = wants_reflection(result, settings, attempt)
        if not outcome.retry:
            outcome.done, outcome.stop_reason = True, "truncated" if result.truncated else "done"
        return outcome
    except Exception as exc:  # noqa: BLE001 - a malformed StepResult fails its episode only
        return failed(f"env.step() returned an unusable result: {type(exc).__name__}: {exc}")


def reflection_message(last_info: Mapping[str, Any], observation: Observation, settings: RolloutSection,
                       attempt: int) -> Message:
    """The prompt of reflection try ``attempt`` (2, 3, ...): the env's feedback, the tries left
    and the reset observation."""
    remaining = settings.reflection_attempts - attempt + 1
    feedback = str(last_info.get("reflection_feedback") or "Your answer was not correct.")
    if last_info.get("format_ok") is False:
        feedback += " Your response did not follow the required format."
    feedback += " This is your last attempt." if remaining == 1 else f" You have {remaining} attempts left."
    text = f"{escape_placeholders(feedback)}\nTry again from the start.\n\n{observation.text}"
    return Message("user", text, list(observation.images))


def reset_failure(value: Any) -> str | None:
    """Why a reflection reset's result cannot be used, or ``None``."""
    if isinstance(value, Observation):
        return None
    return f"env.reset() for a reflection retry returned {type(value).__name__}, not an Observation"

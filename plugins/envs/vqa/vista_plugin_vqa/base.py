"""The shared question-answering env: one problem per episode, optional tool turns, answer attempts.

Turn protocol (what the rollout engine and this env agree on):

- A response with a valid ``<tool_call>`` and no ``<answer>`` is a *tool turn*: the env checks the
  tool is one it offers and within the image budget, records the call (visual search uses the
  points), and returns a non-terminal step with reward 0 and ``info["tool_calls"]``.  The engine runs
  the tools (``vista_rl.make_tool``) and shows the results; with ``execute_tools=True`` the env runs
  them itself and its observation carries the results (for a loop with no tool runner of its own,
  e.g. a hand-written ``env.step`` loop; ``vista eval`` and ``vista train`` run tools in the rollout
  engine, so leave it off there).  ``tool_context_metadata()`` is what the engine should put into
  ``ToolContext.metadata`` (e.g. the full-resolution image behind a downscaled one).  A tool turn the
  engine runs never reaches ``step``: the engine shows it with ``observe_tool_turn``, which records
  the reply and its calls the same way (no turn, no attempt).
- A response with an ``<answer>`` is an attempt, judged at once.  Wrong with ``answer_attempts``
  left: feedback and the same episode goes on (``info["attempts_left"]``).  Right, or out of
  attempts: the episode ends.  (The engine's ``rollout.reflection`` is another mechanism: it resets
  the env for a new try after the episode ends; see :mod:`vista_plugin_vqa.attempts`.)
- A malformed response is feedback (format score 0) and costs a turn; nothing raises.
- ``max_turns`` bounds all turns (then ``truncated``).
"""

from __future__ import annotations

import abc
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image
from pydantic import Field

import vista_rl
from vista_plugin_vqa.attempts import AnswerAttemptsConfig, attempt_factor, feedback_text
from vista_rl import (
    Env,
    Observation,
    ParsedResponse,
    ParsedToolCall,
    ResponseFormat,
    StepResult,
    ToolCallRecord,
    episode_seed,
    parse_response,
)
from vista_rl.rollout import execute_tool_calls, tool_context

THINK_TAGS = "<think>...</think><answer>...</answer>"
ANSWER_TAGS = "<answer>...</answer>"
MAX_WORDS, MAX_WORD_CHARS = 8, 20


class QAEnvConfig(AnswerAttemptsConfig):
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    tools: list[str] = Field(default_factory=list, description="tool ids the model may call")
    execute_tools: bool = Field(False, description="run tool calls inside the env (no engine tool runner)")
    max_turns: int = Field(6, ge=1, le=50)
    max_images: int = Field(6, ge=1, le=64, description="images per episode, the first included")
    correct_reward: float = 1.0
    format_reward: float = Field(0.0, description="added on the final step when the format was right")


@dataclass
class Problem:
    """One episode's question.  ``images`` are shown; ``full_resolution`` maps an image index to the
    original behind a downscaled one (tools read it)."""

    question: str
    images: list[Image.Image]
    reference: Any
    judge: str
    judge_kwargs: dict[str, Any] = field(default_factory=dict)
    oracle_answer: str = ""
    full_resolution: dict[int, Image.Image] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    #: the judge's own settings (e.g. a numeric tolerance from the record's stated precision)
    judge_config: dict[str, Any] = field(default_factory=dict)


def plausible_short_answer(answer: str) -> bool:
    """A short answer is a few words; 30 characters of glued text is not an answer."""
    words = [word.strip(".,;:!?()[]'\"") for word in answer.split()]
    return 0 < len(words) <= MAX_WORDS and all(len(word) <= MAX_WORD_CHARS for word in words)


class ToolQAEnv(Env):
    """Base class: subclasses build a :class:`Problem` per seed and may add reward terms."""

    config_class: type[QAEnvConfig] = QAEnvConfig

    def __init__(self, **config: Any) -> None:
        self.config = self.config_class(**config)
        self.tools = tuple(self.config.tools)
        tags = ("think", "answer") if self.config.prompt_format == "free_think" else ("answer",)
        self.response_format = ResponseFormat(required=tags, answer_or_tool_call=bool(self.tools))
        self.problem: Problem | None = None
        self._judges: dict[str, vista_rl.Judge] = {}
        self._tools: dict[str, vista_rl.Tool] = {}
        self._reset_state()

    # ---------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def make_problem(self, seed: int) -> Problem:
        """The problem for ``seed`` (deterministic)."""

    def answer_is_plausible(self, answer: str) -> bool:
        """Whether an answer is in the answer space at all (``info["action_valid"]``)."""
        return plausible_short_answer(answer)

    def extra_reward(self, parsed: ParsedResponse, final: bool) -> tuple[float, dict[str, Any]]:
        """Reward terms beside the answer (e.g. grounding), added on the final step."""
        return 0.0, {}

    def task_instructions(self) -> str:
        return ""

    def oracle_tool_call(self) -> dict[str, Any] | None:
        """A tool call the oracle makes on its first turn (``None``: answer at once)."""
        return None

    # ------------------------------------------------------------------------ state
    def call_coordinates(self) -> list[tuple[float, float]]:
        """The ``coordinate`` argument of every accepted tool call so far, as (x, y) floats, when it
        names a point inside the first shown image (the image a zoom cuts from unless its ``image``
        argument says otherwise).  Calls without a usable one (missing, wrong length, not numbers),
        on another image, or off the image are skipped: a point off the image names no place, so it
        must not earn a grounding reward.  Grounding rewards count these beside the points written
        in ``<think>``."""
        width, height = self.problem.images[0].size if self.problem and self.problem.images else (0, 0)
        points: list[tuple[float, float]] = []
        for call in self.tool_calls:
            arguments = call.get("arguments") or {}
            coordinate = arguments.get("coordinate")
            if arguments.get("image", 0) != 0 or not isinstance(coordinate, (list, tuple)) or len(coordinate) != 2:
                continue
            try:
                x, y = float(coordinate[0]), float(coordinate[1])
            except (TypeError, ValueError, OverflowError):
                continue
            if 0 <= x < width and 0 <= y < height:  # NaN fails both
                points.append((x, y))
        return points

    def _reset_state(self) -> None:
        self.turns = 0
        self.attempts = 0
        self.done = True
        self.images: list[Image.Image] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.responses: list[ParsedResponse] = []
        self.image_budget_used = 0
        self._oracle_called_tool = False

    @property
    def tags(self) -> str:
        return THINK_TAGS if self.config.prompt_format == "free_think" else ANSWER_TAGS

    def judge(self, name: str) -> vista_rl.Judge:
        if name not in self._judges:
            self._judges[name] = vista_rl.make_judge(name)
        return self._judges[name]

    def configured_judge(self, name: str, config: dict[str, Any]) -> vista_rl.Judge:
        """``judge(name)`` when ``config`` is empty (subclasses may override that), else the judge
        made with ``config`` (a record's own precision), made once per distinct setting."""
        if not config:
            return self.judge(name)
        key = f"{name}:{json.dumps(config, sort_keys=True, default=str)}"
        if key not in self._judges:
            self._judges[key] = vista_rl.make_judge(name, **config)
        return self._judges[key]

    def tool_context_metadata(self) -> dict[str, Any]:
        """For ``ToolContext.metadata``: the full-resolution originals behind shown images."""
        return {"full_resolution": dict(self.problem.full_resolution)} if self.problem else {}

    # ------------------------------------------------------------------------- api
    def system_prompt(self) -> str:
        lines = ["You answer questions about images."]
        if self.task_instructions():
            lines.append(self.task_instructions())
        if self.tools:
            lines.append(
                f"You may call these tools before answering: {', '.join(self.tools)}. Call one with "
                '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call> (after your <think> if you '
                "think); its result comes back in the next message. Images are numbered from 0 (the "
                "first image) in the order you see them.")
        if self.config.answer_attempts > 1:
            lines.append(f"If an answer is wrong you get feedback and up to {self.config.answer_attempts} "
                         "attempts in total.")
        lines.append(f"Give your final answer as {self.tags}.")
        example = "<think>The tallest bar is labelled 2019.</think><answer>2019</answer>"
        lines.append("Example: " + (example if self.config.prompt_format == "free_think" else "<answer>2019</answer>"))
        return "\n".join(lines)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self._reset_state()
        self.problem = self.make_problem(episode_seed(seed))
        self.images = list(self.problem.images)
        self.image_budget_used = len(self.images)
        self.done = False
        placeholders = "".join("<image>\n" for _ in self.problem.images)
        text = f"{placeholders}{self.problem.question}"
        return Observation(text, list(self.problem.images)), {**self.problem.info, "answer": self.problem.reference}

    def step(self, action: str) -> StepResult:
        if self.done or self.problem is None:
            return StepResult(Observation("The episode is over; call reset()."), 0.0, True, False,
                              {"success": False, "format_ok": False, "action_valid": False})
        try:
            return self._step(action if isinstance(action, str) else str(action))
        except Exception as exc:  # noqa: BLE001 - an env bug becomes a recorded failure, never a crash
            self.done = True
            return StepResult(Observation(f"Internal error in the environment: {type(exc).__name__}."), 0.0,
                              False, True, {"success": False, "format_ok": False, "action_valid": False,
                                            "error": f"{type(exc).__name__}: {exc}"})

    def _step(self, action: str) -> StepResult:
        self.turns += 1
        parsed = parse_response(action, self.response_format)
        self.responses.append(parsed)
        calls = [call for call in parsed.tool_calls if call.error is None]
        if not (parsed.answer or "").strip() and calls and self.tools:
            return self._tool_turn(parsed, calls)
        if not parsed.format_ok or not (parsed.answer or "").strip():
            message = parsed.feedback or f"No answer found; answer as {self.tags}."
            if parsed.tool_calls and not self.tools:
                message += " This task offers no tools."
            return self._continue(message, {"format_ok": False, "action_valid": False, "errors": parsed.errors})
        return self._answer_turn(parsed)

    # ----------------------------------------------------------------------- turns
    def _continue(self, message: str, info: dict[str, Any], images: list[Image.Image] | None = None) -> StepResult:
        images = images or []
        truncated = self.turns >= self.config.max_turns
        if truncated:
            self.done = True
            message += " The turn limit is reached; the episode ends."
        elif self.turns == self.config.max_turns - 1:
            message += f" One turn left: answer now as {self.tags}."
        info = {"success": False, "turn": self.turns, "attempt": self.attempts, **info}
        if truncated:
            info.update(self._final_info(correct=False))
        text = message + "".join("\n<image>" for _ in images)
        return StepResult(Observation(text, images), 0.0, False, truncated, info)

    def _tool_turn(self, parsed: ParsedResponse, calls: list[ParsedToolCall]) -> StepResult:
        unknown = [call.name for call in calls if call.name not in self.tools]
        if unknown:
            return self._continue(f"Unknown tool {unknown[0]!r}; available: {', '.join(self.tools)}.",
                                  {"format_ok": True, "action_valid": False})
        if self.image_budget_used + len(calls) > self.config.max_images:
            return self._continue(f"The image limit ({self.config.max_images}) is reached; no more tool calls. "
                                  f"Answer now as {self.tags}.", {"format_ok": True, "action_valid": False})
        records = [{"name": call.name, "arguments": call.arguments} for call in calls]
        self.tool_calls.extend(records)
        info: dict[str, Any] = {"format_ok": True, "action_valid": True, "tool_calls": records,
                                "awaiting_tool_result": not self.config.execute_tools}
        if not self.config.execute_tools:
            self.image_budget_used += len(calls)
            return self._continue("", info)
        # The same guarded tool execution as every engine (vista_rl.rollout.execute_tool_calls): a
        # tool that raises or returns junk becomes an error text, never an exception.
        tools = {str(call.name): self._tool(str(call.name)) for call in calls}
        executions = execute_tool_calls(calls, tools, tool_context(self, self.images))
        texts, images = [], []
        for execution in executions:
            texts.append(f"{execution.name}: {execution.result.text}")
            self.images.extend(execution.result.images)
            images.extend(execution.result.images)
        self.image_budget_used = len(self.images)
        return self._continue("\n".join(texts), info, images)

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        """A tool turn the rollout engine ran (it never reached :meth:`step`): its ``<think>`` goes
        into ``responses`` and the calls :meth:`step` would have accepted into ``tool_calls``, so
        rewards over the whole chain (grounded points, visual search's named points) see every turn.
        Not a turn or an answer attempt: ``turns``, ``attempts`` and the episode's end are untouched.

        What counts is what ``step`` counts, never more: a call that errored, names a tool this env
        does not offer, or has no argument object is ignored, and calls past the image budget
        (``max_images``; a call costs its images, at least one) are dropped, as ``step`` refuses them.
        A policy that spams calls therefore cannot raise a reward that counts calls or points."""
        if self.done or self.problem is None:
            return
        self.responses.append(parse_response(response if isinstance(response, str) else str(response),
                                             self.response_format))
        for call in calls:
            if call.error or call.name not in self.tools or not isinstance(call.arguments, dict):
                continue
            cost = max(call.num_images, 1) if isinstance(call.num_images, int) else 1
            if self.image_budget_used + cost > self.config.max_images:
                break
            self.tool_calls.append({"name": call.name, "arguments": call.arguments})
            self.image_budget_used += cost

    def _tool(self, tool_id: str) -> vista_rl.Tool:
        if tool_id not in self._tools:
            self._tools[tool_id] = vista_rl.make_tool(tool_id)
        return self._tools[tool_id]

    def _answer_turn(self, parsed: ParsedResponse) -> StepResult:
        assert self.problem is not None
        answer = (parsed.answer or "").strip()
        self.attempts += 1
        judge = self.configured_judge(self.problem.judge, self.problem.judge_config)
        verdict = judge(answer, self.problem.reference, **self.problem.judge_kwargs)
        correct = verdict.score >= 1.0 - 1e-9
        valid = correct or self.answer_is_plausible(answer)
        attempts_left = self.config.answer_attempts - self.attempts
        info: dict[str, Any] = {"format_ok": True, "action_valid": valid, "prediction": answer,
                                "judge": verdict.details, "attempt": self.attempts}
        if not correct and attempts_left > 0 and self.turns < self.config.max_turns:
            message = feedback_text(answer, self.problem.reference, attempts_left, self.tools,
                                    bool(self.tool_calls), self.tags)
            return self._continue(message, {**info, "attempts_left": attempts_left})
        self.done = True
        extra, extra_info = self.extra_reward(parsed, final=True)
        reward = (self.config.correct_reward * verdict.score * attempt_factor(self.attempts, self.config)
                  + self.config.format_reward + extra)
        info.update(extra_info)
        info.update(self._final_info(correct=correct))
        message = "Correct." if correct else f"Incorrect. The expected answer was {self._show(self.problem.reference)}."
        return StepResult(Observation(message), reward, True, False, info)

    def _final_info(self, correct: bool) -> dict[str, Any]:
        return {"success": correct, "answer": self.problem.reference if self.problem else None,
                "attempts_used": self.attempts, "first_attempt_correct": correct and self.attempts == 1,
                "tool_calls_total": len(self.tool_calls), "turns_used": self.turns}

    @staticmethod
    def _show(reference: Any) -> str:
        if isinstance(reference, (list, tuple)):  # crowd answers repeat: show the three most voted once each
            return " / ".join(answer for answer, _ in Counter(map(str, reference)).most_common(3))
        return str(reference)

    # --------------------------------------------------------------------- oracle
    def oracle_response(self) -> str | None:
        if self.done or self.problem is None:
            return None
        call = self.oracle_tool_call()
        # An engine that runs tools itself never passes the tool turn to step(), so the oracle also
        # remembers that it already asked for its tool call.
        if (call is not None and not self.tool_calls and not self._oracle_called_tool and self.tools
                and call["name"] in self.tools):
            self._oracle_called_tool = True
            think = call.pop("think", "I should look more closely first.")
            body = f"<tool_call>{json.dumps(call)}</tool_call>"
            return f"<think>{think}</think>{body}" if self.config.prompt_format == "free_think" else body
        answer = self.problem.oracle_answer
        if self.config.prompt_format == "no_think":
            return f"<answer>{answer}</answer>"
        reason = self.problem.info.get("oracle_reasoning", "Reading the image carefully.")
        return f"<think>{reason}</think><answer>{answer}</answer>"

"""One episode's life, shared by every engine: start, turns, timeouts, context window, the end.

:class:`EpisodeDriver` owns everything about a single episode that does not depend on how the model
is called: the start (make the env, ``reset`` with its result type-checked, the system prompt with
the tool schemas appended and placeholders escaped, the first observation), the context the model
sees next (``rollout.window_size``), the bookkeeping of each reply (turn records with their images,
tool-call counts, errors, token accounting and the per-turn or concatenated token view), the env and
tool calls with their timeouts (a tool turn is shown to the env with ``Env.observe_tool_turn``),
reflection resets and the turn/token budgets, and the finished :class:`~vista_rl.trajectory.Trajectory`
(whose metadata says whether a limit the env did not choose cut the episode short: ``cut_off``).

The engines only decide how replies are produced: :class:`~vista_rl.rollout.RolloutEngine` batches
many drivers into one ``generate`` call per turn and shares one :class:`CallPool` between them
(submitting every episode's calls before waiting on any, so env steps run concurrently), while the
verl agent loop drives one driver per sample from asyncio, calling the blocking methods in a thread.
What a reply leads to (tool checks, step results, reflection) is decided by
:mod:`vista_rl.rollout.turn`, which this module calls.

Calls follow a submit/settle split so that a batching engine can put every episode's calls on the
pool first: :meth:`EpisodeDriver.respond` records a reply and submits its calls, :meth:`settle`
waits for them in submission order (see :class:`CallPool`) and applies the outcome;
:meth:`submit_reset`/:meth:`settle_reset` do the same for a reflection reset.  :meth:`turn` is the
whole sequence for an engine that runs one episode at a time.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.env import Env
from vista_rl.model import Generation
from vista_rl.observation import Chat, Message, Observation, escape_placeholders
from vista_rl.rollout.context import messages_after_last_assistant, tools_prompt, window
from vista_rl.rollout.metrics import FirstAttempt, first_attempt_verdict
from vista_rl.rollout.token_view import TokenViewBuilder
from vista_rl.rollout.turn import (
    ToolExecution,
    TurnOutcome,
    checked_tool_result,
    parse_tool_calls,
    reflection_message,
    rejected_tool_call,
    reset_failure,
    step_outcome,
    tool_context,
    tool_outcome,
)
from vista_rl.rollout.workers import CallOutcome, CallPool, PendingCall
from vista_rl.store.images import image_hash
from vista_rl.tool import Tool, ToolResult
from vista_rl.trajectory import Trajectory, Turn
from vista_rl.turn_limit import env_turn_limit, is_cut_off

CHARS_PER_TOKEN = 4  # estimate used only when a backend reports no token ids

#: Makes the tools an env offers (by tool name); the engine's cache decides how often each is built.
ToolFactory = Callable[[Env], dict[str, Tool]]


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: an env, a seed and which of the seed's ``group_size`` samples it is."""

    env_id: str
    seed: int | None
    sample_index: int = 0
    env_config: Mapping[str, Any] = field(default_factory=dict)
    group_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnKey:
    """Which turn of which episode a reply is for: what a backend that draws its reply from the env
    (``env_reply``, e.g. ``scripted:random``) seeds its choice with, so that the reply depends on the
    episode and the run seed, never on batch order or on the worker that runs the episode."""

    env_id: str
    seed: int | None
    sample_index: int
    turn: int
    run_seed: int | None = None


@dataclass
class TurnCalls:
    """The env/tool calls one reply asked for, submitted and not yet waited on."""

    step: PendingCall | None = None
    tools: list[tuple[str, dict[str, Any] | None, ToolResult | PendingCall]] = field(default_factory=list)


@dataclass
class Opened:
    """What starting an env gave: the env, its first observation, reset info, prompt and tools."""

    env: Env
    observation: Observation
    info: dict[str, Any]
    prompt: Any
    tools: dict[str, Tool]
    turn_limit: int | None = None


def open_env(spec: EpisodeSpec, tools_for: ToolFactory) -> Opened:
    """Make and reset the env (blocking: run it on a pool with the env timeout).  ``reset`` must
    return an :class:`Observation`; the env is closed again if anything here fails."""
    env = vista_rl.make_env(spec.env_id, **dict(spec.env_config))
    try:
        observation, info = env.reset(seed=spec.seed)
        if not isinstance(observation, Observation):
            raise TypeError(f"reset() returned {type(observation).__name__}, not an Observation")
        return Opened(env, observation, dict(info or {}), env.system_prompt(), tools_for(env),
                      env_turn_limit(env))
    except BaseException:
        env.close()
        raise


def shown(message: Message, size: int | None) -> Message:
    """``message`` with each image resized to ``size`` x ``size`` (``rollout.image_size``; BOX, as the
    local engine's encoder resizes), or unchanged."""
    if size is None or not message.images or all(image.size == (size, size) for image in message.images):
        return message
    images = [image if image.size == (size, size) else image.resize((size, size), Image.Resampling.BOX)
              for image in message.images]
    return Message(message.role, message.content, images)


class EpisodeDriver:
    """The state and rules of one episode (see the module doc).  Not thread-safe: one caller."""

    def __init__(self, spec: EpisodeSpec, settings: RolloutSection, *, order: int = 0,
                 end_tokens: set[int] | None = None, stop_strings: bool = False) -> None:
        self.spec = spec
        self.settings = settings
        self.order = order
        #: unique per episode: what a backend that keeps state per episode knows it by
        self.key = uuid.uuid4().hex
        #: the backend was told this episode ended (``RolloutEngine`` tells it once)
        self.key_ended = False
        #: end-of-turn token ids (shared with, and grown by, the engine: see ``token_view``)
        self.end_tokens: set[int] = end_tokens if end_tokens is not None else set()
        self.stop_strings = stop_strings
        trajectory = Trajectory(env_id=spec.env_id, seed=spec.seed, sample_index=spec.sample_index)
        trajectory.metadata.update(dict(spec.metadata))
        trajectory.metadata.update(episode_index=order, group_id=spec.group_id or f"{spec.env_id}:{spec.seed}")
        self.trajectory = trajectory
        self.env: Env | None = None
        self.system: Message | None = None
        self.history: list[Message] = []
        #: history messages as the model sees them (``rollout.image_size``), by the message's id
        self._shown: dict[int, tuple[Message, Message]] = {}
        self.images_seen: list[Image.Image] = []
        self.tools: dict[str, Tool] = {}
        self.builder = TokenViewBuilder(per_turn=settings.per_turn_sequences)
        self.attempt = 1
        self.turns_in_attempt = 0
        self.generated_tokens = 0
        self.tokens_estimated = False
        self.context_tokens = 0
        self.format_errors = 0
        self.env_steps = 0
        self.tool_call_count = 0
        self.done = False
        self.stop_reason = ""
        self.oracle: str | None = None
        self.env_turn_limit: int | None = None
        self.needs_reset = False
        self.env_hung = False
        self.first_attempt = FirstAttempt()

    # -------------------------------------------------------------------- state
    def fail(self, reason: str, stop_reason: str) -> None:
        """End the episode as failed (the first reason wins the ``failure`` field)."""
        self.trajectory.failure = reason
        self.done, self.stop_reason = True, stop_reason

    def end(self, stop_reason: str) -> None:
        """End the episode normally (e.g. an engine's own length limit)."""
        if not self.done:
            self.done, self.stop_reason = True, stop_reason

    def add_user(self, message: Message) -> None:
        self.history.append(message)
        self.images_seen.extend(message.images)

    def turn_key(self, run_seed: int | None = None) -> TurnKey:
        """The key of the turn the model answers next (see :class:`TurnKey`)."""
        spec = self.spec
        return TurnKey(spec.env_id, spec.seed, spec.sample_index, len(self.trajectory.turns), run_seed)

    def chat(self) -> Chat:
        """What the model sees next: the system prompt and the history, windowed, each image at
        ``rollout.image_size``.  The history and the turn records keep the env's own images (tools
        crop those: ``images_seen``)."""
        system = [self.system] if self.system is not None else []
        size = self.settings.image_size
        if size is None:
            return system + window(self.history, self.settings.window_size)
        out = []
        for message in window(self.history, self.settings.window_size):
            if id(message) not in self._shown:
                self._shown[id(message)] = (message, shown(message, size))  # the message kept alive with its id
            out.append(self._shown[id(message)][1])
        return system + out

    # -------------------------------------------------------------------- start
    def submit_open(self, pool: CallPool, tools_for: ToolFactory) -> PendingCall:
        return pool.submit(open_env, self.spec, tools_for)

    def start(self, outcome: CallOutcome) -> None:
        """Book the result of :func:`open_env` (a failure or timeout ends the episode)."""
        spec = self.spec
        if not outcome.ok:
            self.fail(outcome.describe(f"starting env {spec.env_id} (make, reset, system_prompt, turn_limit)",
                                       self.settings.env_timeout_s), "env_error")
            return
        opened: Opened = outcome.value
        self.env, self.tools, self.env_turn_limit = opened.env, opened.tools, opened.turn_limit
        try:
            self._start(opened)
        except Exception as exc:  # noqa: BLE001 - e.g. a tool whose schema cannot be built
            self.fail(f"starting env {spec.env_id} failed: {type(exc).__name__}: {exc}", "env_error")

    def open(self, pool: CallPool, tools_for: ToolFactory) -> None:
        """Start in one call (for engines that run one episode at a time)."""
        self.start(pool.wait(self.submit_open(pool, tools_for), self.settings.env_timeout_s))

    def _start(self, opened: Opened) -> None:
        prompt = opened.prompt if isinstance(opened.prompt, str) else str(opened.prompt or "")
        if opened.tools and self.settings.describe_tools:
            prompt = (prompt + "\n\n" if prompt else "") + tools_prompt(opened.tools)
        self.system = Message("system", escape_placeholders(prompt)) if prompt else None
        trajectory = self.trajectory
        trajectory.system_prompt = prompt
        trajectory.initial_observation = opened.observation.text
        trajectory.initial_images = list(opened.observation.images)
        trajectory.metadata["reset_info"] = opened.info
        self.add_user(Message.from_observation(opened.observation))

    # --------------------------------------------------------------- one reply
    def respond(self, pool: CallPool, chat: Chat, generation: Generation) -> TurnCalls:
        """Record the reply to ``chat`` and submit the env/tool calls it asks for."""
        text = generation.text if isinstance(generation.text, str) else str(generation.text)
        current = self.history[-1]
        turn = Turn(observation=current.content, response=text, images=list(current.images),
                    observation_role=current.role)
        turn.info["finish_reason"] = str(getattr(generation, "finish_reason", ""))
        self.trajectory.turns.append(turn)
        self.turns_in_attempt += 1
        self._account_tokens(chat, generation, text)
        self.history.append(Message("assistant", escape_placeholders(text)))

        tool_calls, parse_error = parse_tool_calls(text, self.tools)
        if parse_error is not None:
            turn.error = parse_error
        calls = TurnCalls()
        if not tool_calls:
            assert self.env is not None
            calls.step = pool.submit(self.env.step, text)
            return calls
        context = tool_context(self.env, self.images_seen, {"env_id": self.spec.env_id, "seed": self.spec.seed})
        for index, call in enumerate(tool_calls):  # rejected calls get their error result now
            arguments = call.arguments if call.error is None else None
            result: ToolResult | PendingCall | None = rejected_tool_call(call, index, self.tools)
            if result is None:
                result = pool.submit(self.tools[str(call.name)], call.arguments, context)
            calls.tools.append((call.name or "?", arguments, result))
        return calls

    def _account_tokens(self, chat: Chat, generation: Generation, text: str) -> None:
        token_ids = list(getattr(generation, "token_ids", None) or [])
        prompt_ids = getattr(generation, "prompt_token_ids", None)
        finish_reason = str(getattr(generation, "finish_reason", "stop"))
        if token_ids:
            self.generated_tokens += len(token_ids)
        else:
            self.generated_tokens += len(text) // CHARS_PER_TOKEN
            self.tokens_estimated = True
        if prompt_ids is not None:
            self.context_tokens = len(prompt_ids) + len(token_ids)
        else:
            self.context_tokens = (sum(len(message.content) for message in chat) + len(text)) // CHARS_PER_TOKEN
        if self.builder.active:
            added = chat if self.builder.per_turn else messages_after_last_assistant(chat)
            new_images = [image for message in added for image in message.images]
            refs = [image_hash(image) for image in new_images] if prompt_ids is not None else []
            encoded = getattr(generation, "encoded_images", None)  # the prompt's images: the new ones last
            new_inputs = (list(encoded)[len(encoded) - len(new_images):]
                          if isinstance(encoded, list) and len(encoded) >= len(new_images) else None)
            self.builder.add_turn(prompt_ids, getattr(generation, "token_ids", None),
                                  getattr(generation, "logprobs", None), finish_reason, new_images, refs, text,
                                  self.end_tokens, new_inputs)
        if token_ids and finish_reason == "stop" and not self.stop_strings:
            self.end_tokens.add(int(token_ids[-1]))  # a "stop" without stop strings ended on an EOS token

    def settle(self, calls: TurnCalls, pool: CallPool) -> tuple[int, int]:
        """Wait for ``calls`` (in submission order) and apply what they led to.  Returns how many
        env steps and tool calls were waited on (for the engine's timings)."""
        if calls.step is not None:
            outcome = pool.wait(calls.step, self.settings.env_timeout_s)
            if not outcome.ok:
                self.env_failed(outcome, "env.step()")
            else:
                self.apply(step_outcome(outcome.value, self.settings, self.attempt))
            return 1, 0
        executions: list[ToolExecution] = []
        for name, arguments, result in calls.tools:
            if isinstance(result, PendingCall):
                outcome = pool.wait(result, self.settings.tool_timeout_s)
                if outcome.timed_out:  # the worker thread is stuck: end the episode, not just the call
                    if not self.done:
                        self.fail(outcome.describe(f"tool {name}", self.settings.tool_timeout_s), "tool_timeout")
                    continue
                result = checked_tool_result(name, outcome.error if outcome.error is not None else outcome.value)
            execution = ToolExecution(name, arguments, result)
            self.trajectory.turns[-1].tool_calls.append(execution.record())
            self.tool_call_count += 1
            executions.append(execution)
        if executions and not self.done:
            self.observe_tool_turn(executions, pool)
        if executions and not self.done:
            self.apply(tool_outcome(executions, self.settings.tool_response_role))
        return 0, len(calls.tools)

    def observe_tool_turn(self, executions: Sequence[ToolExecution], pool: CallPool) -> None:
        """Show the env the tool turn it never got as ``step`` (:meth:`Env.observe_tool_turn`), on
        the pool with the env timeout; a raise or a hang fails this episode only.  Skipped for an env
        that keeps the default no-op (no pool round trip for the envs that do not care)."""
        env = self.env
        if env is None or type(env).observe_tool_turn is Env.observe_tool_turn:
            return
        records = copy.deepcopy([execution.record() for execution in executions])  # the env may keep them
        call = pool.submit(env.observe_tool_turn, self.trajectory.turns[-1].response, records)
        outcome = pool.wait(call, self.settings.env_timeout_s)
        if not outcome.ok:
            self.env_failed(outcome, "env.observe_tool_turn()")

    def apply(self, outcome: TurnOutcome) -> None:
        """Book one reply's outcome (see ``vista_rl.rollout.turn``)."""
        if outcome.failure is not None:
            self.fail(outcome.failure, outcome.stop_reason)
            return
        if outcome.tool_calls:
            assert outcome.observation is not None
            self.add_user(outcome.observation)
            return
        turn = self.trajectory.turns[-1]
        turn.reward = outcome.reward
        turn.info.update(outcome.info)
        self.builder.set_last_reward(outcome.reward)
        self.env_steps += 1
        if outcome.info.get("format_ok") is False:
            self.format_errors += 1
        if outcome.success is not None:
            self.trajectory.success = outcome.success
        if self.attempt == 1:
            self.first_attempt = first_attempt_verdict(outcome.info, self.trajectory.success, self.first_attempt)
            self.trajectory.metadata["first_attempt_success"] = self.first_attempt.success
        if outcome.observation is not None:
            self.add_user(outcome.observation)
            return
        self.trajectory.metadata["final_observation"] = outcome.final_observation
        if outcome.retry:
            self.needs_reset = True
            self.trajectory.metadata["reflection_reason"] = outcome.info.get("reflection_feedback", "")
        else:
            self.done, self.stop_reason = True, outcome.stop_reason

    # ------------------------------------------------------------- reflection
    def submit_reset(self, pool: CallPool) -> PendingCall:
        assert self.env is not None
        self.needs_reset = False
        return pool.submit(_reset, self.env, self.spec.seed)

    def settle_reset(self, call: PendingCall, pool: CallPool) -> None:
        """Reflection: the env was reset to the same seed; tell the model its answer was wrong."""
        outcome = pool.wait(call, self.settings.env_timeout_s)
        if not outcome.ok:
            self.env_failed(outcome, "env.reset() for a reflection retry")
            return
        problem = reset_failure(outcome.value)
        if problem is not None:
            self.fail(problem, "env_error")
            return
        self.attempt += 1
        self.turns_in_attempt = 0
        self.add_user(reflection_message(self.trajectory.turns[-1].info, outcome.value, self.settings, self.attempt))

    def check_budgets(self) -> None:
        """After a turn: the token budget, then the turn budget of the current attempt."""
        if self.done:
            return
        budget = self.settings.max_context_tokens
        if budget is not None and self.context_tokens >= budget:
            self.done, self.stop_reason = True, "token_budget"
        elif self.turns_in_attempt >= self.settings.max_turns:
            self.done, self.stop_reason = True, "max_turns"

    def turn(self, pool: CallPool, chat: Chat, generation: Generation) -> tuple[int, int]:
        """A whole turn after the reply, for engines that run one episode at a time: the calls,
        a reflection reset if one is due, the budgets.  Blocking; never raises for env or tool
        failures (they end the episode)."""
        try:
            counts = self.settle(self.respond(pool, chat, generation), pool)
        except Exception as exc:  # noqa: BLE001 - one bad output fails its own episode
            self.fail(f"handling the model's response raised {type(exc).__name__}: {exc}", "model_error")
            return 0, 0
        if self.needs_reset and not self.done:
            self.settle_reset(self.submit_reset(pool), pool)
        self.check_budgets()
        return counts

    def env_failed(self, outcome: CallOutcome, what: str) -> None:
        if outcome.timed_out:
            self.env_hung = True
        self.fail(outcome.describe(what, self.settings.env_timeout_s),
                  "env_timeout" if outcome.timed_out else "env_error")

    # ----------------------------------------------------------------- the end
    def finish(self) -> Trajectory:
        """The finished trajectory, with its metadata and token view(s); closes the env."""
        trajectory = self.trajectory
        trajectory.metadata.update(
            stop_reason=self.stop_reason, attempts=self.attempt, generated_tokens=self.generated_tokens,
            tokens_estimated=self.tokens_estimated, context_tokens=self.context_tokens,
            format_errors=self.format_errors, env_steps=self.env_steps, tool_calls=self.tool_call_count,
            turn_limit=self.settings.max_turns, env_turn_limit=self.env_turn_limit,
            cut_off=is_cut_off(self.stop_reason, self.settings.max_turns, self.env_turn_limit),
        )
        trajectory.metadata.setdefault("first_attempt_success", trajectory.success)
        trajectory.turn_views = self.builder.turn_views if self.builder.active else []
        try:
            trajectory.token_view = self.builder.build()
        except Exception as exc:  # noqa: BLE001 - an inconsistent view is dropped, the episode is kept
            trajectory.token_view = None
            self.builder.disable(f"building the token view raised {type(exc).__name__}: {exc}")
        if self.builder.error and (self.builder.turn_ends or self.builder.turn_views):
            trajectory.metadata["token_view_error"] = self.builder.error
        self.close()
        return trajectory

    def close(self) -> None:
        """Close on a separate daemon thread: ``close()`` of a misbehaving env may hang too."""
        env, self.env = self.env, None
        if env is not None and not self.env_hung:
            threading.Thread(target=_quiet_close, args=(env,), daemon=True).start()


def chat_images(messages: Sequence[Message]) -> list[Image.Image]:
    """Every image of ``messages``, in placeholder order."""
    return [image for message in messages for image in message.images]


def _reset(env: Env, seed: int | None) -> Observation:
    observation, _info = env.reset(seed=seed)
    return observation


def _quiet_close(env: Env) -> None:
    with contextlib.suppress(Exception):  # closing is best effort; the episode is already recorded
        env.close()

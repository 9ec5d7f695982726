"""One episode's life, shared by every engine: start, turns, timeouts, context window, the end.

:class:`EpisodeDriver` owns everything about a single episode that does not depend on how the model
is called or how a blocking call is waited for: the start (make the env, ``reset`` with its result
type-checked, the system prompt with the tool schemas appended and placeholders escaped, the first
observation), the context the model sees next (:class:`~vista_rl.rollout.conversation.Conversation`),
the bookkeeping of each reply (turn records with their images, tool-call counts, errors, token
accounting and the per-turn or concatenated token view), what the env and tool calls led to (a tool
turn is shown to the env with ``Env.observe_tool_turn``), reflection resets, the turn/token budgets,
and the finished :class:`~vista_rl.trajectory.Trajectory` with its
:class:`~vista_rl.rollout.stats.EpisodeStats`.

The driver does no I/O.  Each method that needs the env or a tool returns the calls it needs as data
(:class:`~vista_rl.rollout.calls.Call`, with the timeout from ``rollout``) and the next method takes
their outcomes (:class:`~vista_rl.rollout.calls.CallOutcome`: a value, an exception or a timeout)::

    driver.start(run(driver.open_call(tools_for)))
    while not driver.done:
        calls = driver.respond(driver.chat(), generate(driver.chat()))
        while calls:                       # the reply's step or tool calls, then an observe or a reset
            calls = driver.settle([run(call) for call in calls])
    trajectory = driver.finish()
    run_detached(driver.close_call())

So :class:`~vista_rl.rollout.RolloutEngine` runs every live episode's calls on its thread pool before
waiting on any (env steps run concurrently), the verl agent loop awaits them on asyncio, and a unit
test drives a whole episode, timeouts included, by calling ``fn`` itself or handing in a timeout.
What a reply leads to (tool checks, step results, reflection) is decided by
:mod:`vista_rl.rollout.turn`, which this module calls.

The driver's :class:`Phase` says what it waits for; a method called in the wrong phase raises.  An
episode ends in one place, :meth:`EpisodeDriver._stop` (the first end wins).
"""

from __future__ import annotations

import copy
import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.env import Env
from vista_rl.model import Generation
from vista_rl.observation import Chat, Message, Observation, escape_placeholders
from vista_rl.rollout.calls import Call, CallKind, CallOutcome
from vista_rl.rollout.context import messages_after_last_assistant, tools_prompt
from vista_rl.rollout.conversation import Conversation, shown
from vista_rl.rollout.metrics import FirstAttempt, first_attempt_verdict
from vista_rl.rollout.stats import EpisodeStats
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
from vista_rl.store.images import image_hash
from vista_rl.tool import Tool, ToolResult
from vista_rl.trajectory import Trajectory, Turn
from vista_rl.turn_limit import env_turn_limit, is_cut_off

__all__ = ["CHARS_PER_TOKEN", "EpisodeDriver", "EpisodeSpec", "Opened", "Phase", "Tally", "ToolFactory", "TurnKey",
           "open_env", "shown"]

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
class Opened:
    """What starting an env gave: the env, its first observation, reset info, prompt and tools."""

    env: Env
    observation: Observation
    info: dict[str, Any]
    prompt: Any
    tools: dict[str, Tool]
    turn_limit: int | None = None


def open_env(spec: EpisodeSpec, tools_for: ToolFactory) -> Opened:
    """Make and reset the env (blocking: the driver's ``OPEN`` call).  ``reset`` must return an
    :class:`Observation`; the env is closed again if anything here fails."""
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


class Phase(enum.Enum):
    """What an :class:`EpisodeDriver` waits for (and so which of its methods may be called)."""

    NEW = "new"  # nothing yet: open_call()
    OPENING = "opening"  # the OPEN outcome: start()
    READY = "ready"  # a reply: respond() (or, before it, an env-drawn reply: oracle_call()/oracle_reply())
    ACTING = "acting"  # the reply's STEP or TOOL outcomes: settle()
    OBSERVING = "observing"  # the OBSERVE outcome: settle()
    RESETTING = "resetting"  # the RESET outcome: settle()
    DONE = "done"  # ended (stop_reason says why): finish()
    FINISHED = "finished"  # the trajectory was handed out


@dataclass
class Tally:
    """The running counts of one episode, reported at the end as :class:`EpisodeStats`."""

    attempt: int = 1
    turns_in_attempt: int = 0
    generated_tokens: int = 0
    tokens_estimated: bool = False
    context_tokens: int = 0
    format_errors: int = 0
    env_steps: int = 0
    tool_calls: int = 0
    #: the first attempt's verdict, once a step of it was scored
    first_attempt: FirstAttempt | None = None


@dataclass
class _LiveEnv:
    """The started env, its tools and turn limit; ``hung`` once a call on it timed out (then it is
    never closed: ``close()`` would hang too)."""

    env: Env
    tools: dict[str, Tool]
    turn_limit: int | None
    hung: bool = False


@dataclass
class _Reply:
    """The latest reply's tool calls, in order (a rejected one carries its error result already, the
    others take their call's outcome), and what they gave once settled."""

    tools: list[tuple[str, dict[str, Any] | None, ToolResult | None]] = field(default_factory=list)
    executions: list[ToolExecution] = field(default_factory=list)


class EpisodeDriver:
    """The state and rules of one episode (see the module doc).  Not thread-safe: one caller."""

    def __init__(self, spec: EpisodeSpec, settings: RolloutSection, *, order: int = 0,
                 end_tokens: set[int] | None = None, stop_strings: bool = False) -> None:
        self.spec = spec
        self.settings = settings
        self.order = order
        #: unique per episode: what a backend that keeps state per episode knows it by
        self.key = uuid.uuid4().hex
        #: end-of-turn token ids (shared with, and grown by, the engine: see ``token_view``)
        self.end_tokens: set[int] = end_tokens if end_tokens is not None else set()
        self.stop_strings = stop_strings
        trajectory = Trajectory(env_id=spec.env_id, seed=spec.seed, sample_index=spec.sample_index)
        trajectory.metadata.update(dict(spec.metadata))
        trajectory.metadata.update(episode_index=order, group_id=self._group_id)
        self.trajectory = trajectory
        self.conversation = Conversation(settings)
        self.builder = TokenViewBuilder(per_turn=settings.per_turn_sequences)
        self.tally = Tally()
        self._live: _LiveEnv | None = None
        self._phase = Phase.NEW
        self._stop_reason = ""
        #: the calls returned last, whose outcomes the next call of the protocol takes
        self._awaiting: tuple[Call, ...] = ()
        self._reply: _Reply | None = None

    # -------------------------------------------------------------------- state
    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def done(self) -> bool:
        return self._phase in (Phase.DONE, Phase.FINISHED)

    @property
    def stop_reason(self) -> str:
        """Why the episode ended (``""`` while it runs)."""
        return self._stop_reason

    @property
    def tool_calls_asked(self) -> int:
        """How many tool calls the latest reply asked for, rejected ones included (0 for an action)."""
        return len(self._reply.tools) if self._reply is not None else 0

    @property
    def _group_id(self) -> str:
        return self.spec.group_id or f"{self.spec.env_id}:{self.spec.seed}"

    def _stop(self, stop_reason: str, failure: str | None = None) -> None:
        """The one way an episode ends; the first end wins (its stop reason and failure)."""
        if self.done:
            return
        if failure is not None:
            self.trajectory.failure = failure
        self._stop_reason = stop_reason
        self._phase = Phase.DONE
        self._awaiting = ()

    def fail(self, reason: str, stop_reason: str) -> None:
        """End the episode as failed (e.g. the model backend raised for it)."""
        self._stop(stop_reason, reason)

    def end(self, stop_reason: str) -> None:
        """End the episode normally (e.g. an engine's own length limit)."""
        self._stop(stop_reason)

    def _expect(self, what: str, *phases: Phase) -> None:
        if self._phase not in phases:
            expected = " or ".join(phase.value for phase in phases)
            raise RuntimeError(f"EpisodeDriver.{what}() in phase {self._phase.value}; it needs {expected} "
                               f"(episode {self.spec.env_id} seed {self.spec.seed})")

    def _await(self, *calls: Call) -> tuple[Call, ...]:
        self._awaiting = calls
        return calls

    def _take(self, what: str, outcomes: Sequence[CallOutcome], kind: CallKind | None = None) -> tuple[Call, ...]:
        """The calls whose ``outcomes`` these are (one each, in order), no longer awaited."""
        calls, self._awaiting = self._awaiting, ()
        if len(outcomes) != len(calls) or not calls or (kind is not None and calls[0].kind is not kind):
            raise RuntimeError(f"EpisodeDriver.{what}() got {len(outcomes)} outcome(s) for the calls "
                               f"{[call.label for call in calls]}")
        return calls

    def turn_key(self, run_seed: int | None = None) -> TurnKey:
        """The key of the turn the model answers next (see :class:`TurnKey`)."""
        spec = self.spec
        return TurnKey(spec.env_id, spec.seed, spec.sample_index, len(self.trajectory.turns), run_seed)

    def chat(self) -> Chat:
        """What the model sees next (see :meth:`Conversation.chat`)."""
        return self.conversation.chat()

    # -------------------------------------------------------------------- start
    def open_call(self, tools_for: ToolFactory) -> Call:
        """The call that makes and resets the env (:func:`open_env`); its outcome goes to :meth:`start`."""
        self._expect("open_call", Phase.NEW)
        self._phase = Phase.OPENING
        label = f"starting env {self.spec.env_id} (make, reset, system_prompt, turn_limit)"
        return self._await(Call(CallKind.OPEN, open_env, (self.spec, tools_for), self.settings.env_timeout_s,
                                label))[0]

    def start(self, outcome: CallOutcome) -> None:
        """Book the result of :func:`open_env` (a failure or timeout ends the episode)."""
        self._expect("start", Phase.OPENING)
        (call,) = self._take("start", [outcome])
        if not outcome.ok:
            self._stop("env_error", outcome.describe(call.label, call.timeout_s))
            return
        opened: Opened = outcome.value
        self._live = _LiveEnv(opened.env, opened.tools, opened.turn_limit)
        self._phase = Phase.READY
        try:
            self._start(opened)
        except Exception as exc:  # noqa: BLE001 - e.g. a tool whose schema cannot be built
            self._stop("env_error", f"starting env {self.spec.env_id} failed: {type(exc).__name__}: {exc}")

    def _start(self, opened: Opened) -> None:
        prompt = opened.prompt if isinstance(opened.prompt, str) else str(opened.prompt or "")
        if opened.tools and self.settings.describe_tools:
            prompt = (prompt + "\n\n" if prompt else "") + tools_prompt(opened.tools)
        self.conversation.system = Message("system", escape_placeholders(prompt)) if prompt else None
        trajectory = self.trajectory
        trajectory.system_prompt = prompt
        trajectory.initial_observation = opened.observation.text
        trajectory.initial_images = list(opened.observation.images)
        trajectory.metadata["reset_info"] = opened.info
        self.conversation.add_user(Message.from_observation(opened.observation))

    def _env(self) -> _LiveEnv:
        if self._live is None:
            raise RuntimeError(f"episode {self.spec.env_id} seed {self.spec.seed} has no started env")
        return self._live

    # ------------------------------------------------------- env-drawn replies
    def oracle_call(self, reply: Callable[[Env, TurnKey], str | None], run_seed: int | None, label: str) -> Call:
        """The call that draws this turn's reply from the env (``reply(env, turn_key)``, for a backend
        that needs one); its outcome goes to :meth:`oracle_reply`."""
        self._expect("oracle_call", Phase.READY)
        return self._await(Call(CallKind.ORACLE, reply, (self._env().env, self.turn_key(run_seed)),
                                self.settings.env_timeout_s, label))[0]

    def oracle_reply(self, outcome: CallOutcome) -> str | None:
        """The drawn reply; a raise or a hang ends the episode (``None``)."""
        self._expect("oracle_reply", Phase.READY)
        (call,) = self._take("oracle_reply", [outcome], CallKind.ORACLE)
        if not outcome.ok:
            self._env_failed(outcome, call)
            return None
        value: str | None = outcome.value
        return value

    # --------------------------------------------------------------- one reply
    def respond(self, chat: Chat, generation: Generation) -> tuple[Call, ...]:
        """Record the reply to ``chat`` and return the calls it needs: its env step, or its tool
        calls (run them concurrently, hand their outcomes to :meth:`settle` in this order).  Empty
        when it needs none: the turn is then over.  Never raises for a bad reply (it fails the episode)."""
        self._expect("respond", Phase.READY)
        if self._awaiting:
            raise RuntimeError(f"EpisodeDriver.respond() while {self._awaiting[0].label} is awaited")
        self._reply = None
        try:
            return self._respond(chat, generation)
        except Exception as exc:  # noqa: BLE001 - one bad output fails its own episode
            self._stop("model_error", f"handling the model's response raised {type(exc).__name__}: {exc}")
            return ()

    def _respond(self, chat: Chat, generation: Generation) -> tuple[Call, ...]:
        text = generation.text if isinstance(generation.text, str) else str(generation.text)
        current = self.conversation.last
        turn = Turn(observation=current.content, response=text, images=list(current.images),
                    observation_role=current.role)
        turn.info["finish_reason"] = str(generation.finish_reason)
        self.trajectory.turns.append(turn)
        self.tally.turns_in_attempt += 1
        self._account_tokens(chat, generation, text)
        self.conversation.add_assistant(escape_placeholders(text))

        live = self._env()
        tool_calls, parse_error = parse_tool_calls(text, live.tools)
        if parse_error is not None:
            turn.error = parse_error
        self._phase = Phase.ACTING
        if not tool_calls:
            return self._await(Call(CallKind.STEP, live.env.step, (text,), self.settings.env_timeout_s, "env.step()"))
        context = tool_context(live.env, self.conversation.images_seen,
                               {"env_id": self.spec.env_id, "seed": self.spec.seed})
        reply, calls = _Reply(), []
        for index, call in enumerate(tool_calls):  # rejected calls get their error result now
            name = call.name or "?"
            rejected = rejected_tool_call(call, index, live.tools)
            if rejected is None:
                calls.append(Call(CallKind.TOOL, live.tools[str(call.name)], (call.arguments, context),
                                  self.settings.tool_timeout_s, f"tool {name}"))
            reply.tools.append((name, call.arguments if call.error is None else None, rejected))
        self._reply = reply
        if not calls:
            return self._settle_tools((), ())
        return self._await(*calls)

    def _account_tokens(self, chat: Chat, generation: Generation, text: str) -> None:
        tally = self.tally
        token_ids = list(generation.token_ids or [])
        prompt_ids = generation.prompt_token_ids
        finish_reason = str(generation.finish_reason)
        if token_ids:
            tally.generated_tokens += len(token_ids)
        else:
            tally.generated_tokens += len(text) // CHARS_PER_TOKEN
            tally.tokens_estimated = True
        if prompt_ids is not None:
            tally.context_tokens = len(prompt_ids) + len(token_ids)
        else:
            tally.context_tokens = (sum(len(message.content) for message in chat) + len(text)) // CHARS_PER_TOKEN
        if self.builder.active:
            added = chat if self.builder.per_turn else messages_after_last_assistant(chat)
            new_images = [image for message in added for image in message.images]
            refs = [image_hash(image) for image in new_images] if prompt_ids is not None else []
            encoded = generation.encoded_images  # the prompt's images: the new ones last
            new_inputs = (list(encoded)[len(encoded) - len(new_images):]
                          if isinstance(encoded, list) and len(encoded) >= len(new_images) else None)
            self.builder.add_turn(prompt_ids, generation.token_ids, generation.logprobs, finish_reason, new_images,
                                  refs, text, self.end_tokens, new_inputs)
        if token_ids and finish_reason == "stop" and not self.stop_strings:
            self.end_tokens.add(int(token_ids[-1]))  # a "stop" without stop strings ended on an EOS token

    # ------------------------------------------------------------ the outcomes
    def settle(self, outcomes: Sequence[CallOutcome]) -> tuple[Call, ...]:
        """Take the outcomes of the calls returned last (one each, in order) and return the calls they
        lead to (the env shown a tool turn, a reflection reset), or nothing: the turn is over (its
        budgets checked).  Never raises for an env or tool failure (it ends the episode)."""
        self._expect("settle", Phase.ACTING, Phase.OBSERVING, Phase.RESETTING)
        phase, calls = self._phase, self._take("settle", outcomes)
        try:
            if phase is Phase.OBSERVING:
                return self._settle_observe(calls[0], outcomes[0])
            if phase is Phase.RESETTING:
                return self._settle_reset(calls[0], outcomes[0])
            if calls[0].kind is CallKind.STEP:
                return self._settle_step(calls[0], outcomes[0])
            return self._settle_tools(calls, outcomes)
        except Exception as exc:  # noqa: BLE001 - what a reply led to fails its own episode, never the batch
            self._stop("model_error", f"handling the model's response raised {type(exc).__name__}: {exc}")
            return ()

    def _settle_step(self, call: Call, outcome: CallOutcome) -> tuple[Call, ...]:
        if not outcome.ok:
            self._env_failed(outcome, call)
            return ()
        return self._apply(step_outcome(outcome.value, self.settings, self.tally.attempt))

    def _settle_tools(self, calls: Sequence[Call], outcomes: Sequence[CallOutcome]) -> tuple[Call, ...]:
        """Each tool call's result, in the reply's order; a hung tool ends the episode (its worker is
        stuck), the others are still recorded."""
        reply = self._reply
        assert reply is not None
        ran = iter(zip(calls, outcomes, strict=True))
        for name, arguments, result in reply.tools:
            if result is None:
                call, outcome = next(ran)
                if outcome.timed_out:
                    self._stop("tool_timeout", outcome.describe(call.label, call.timeout_s))
                    continue
                result = checked_tool_result(name, outcome.error if outcome.error is not None else outcome.value)
            execution = ToolExecution(name, arguments, result)
            self.trajectory.turns[-1].tool_calls.append(execution.record())
            self.tally.tool_calls += 1
            reply.executions.append(execution)
        if not reply.executions or self.done:
            return self._turn_over()
        observe = self._observe_call(reply.executions)
        if observe is None:
            return self._apply(tool_outcome(reply.executions, self.settings.tool_response_role))
        self._phase = Phase.OBSERVING
        return self._await(observe)

    def _observe_call(self, executions: Sequence[ToolExecution]) -> Call | None:
        """Show the env the tool turn it never got as ``step`` (:meth:`Env.observe_tool_turn`), with
        the env timeout; a raise or a hang fails this episode only.  ``None`` for an env that keeps the
        default no-op (no call at all for the envs that do not care)."""
        env = self._env().env
        if type(env).observe_tool_turn is Env.observe_tool_turn:
            return None
        records = copy.deepcopy([execution.record() for execution in executions])  # the env may keep them
        return Call(CallKind.OBSERVE, env.observe_tool_turn, (self.trajectory.turns[-1].response, records),
                    self.settings.env_timeout_s, "env.observe_tool_turn()")

    def _settle_observe(self, call: Call, outcome: CallOutcome) -> tuple[Call, ...]:
        if not outcome.ok:
            self._env_failed(outcome, call)
            return ()
        assert self._reply is not None
        return self._apply(tool_outcome(self._reply.executions, self.settings.tool_response_role))

    def _apply(self, outcome: TurnOutcome) -> tuple[Call, ...]:
        """Book one reply's outcome (see ``vista_rl.rollout.turn``); a wrong final answer under
        reflection returns the reset call."""
        if outcome.failure is not None:
            self._stop(outcome.stop_reason, outcome.failure)
            return ()
        if outcome.tool_calls:
            assert outcome.observation is not None
            self.conversation.add_user(outcome.observation)
            return self._turn_over()
        self._book_step(outcome)
        if outcome.observation is not None:
            self.conversation.add_user(outcome.observation)
            return self._turn_over()
        self.trajectory.metadata["final_observation"] = outcome.final_observation
        if not outcome.retry:
            self._stop(outcome.stop_reason)
            return ()
        self.trajectory.metadata["reflection_reason"] = outcome.info.get("reflection_feedback", "")
        self._phase = Phase.RESETTING
        return self._await(Call(CallKind.RESET, _reset, (self._env().env, self.spec.seed),
                                self.settings.env_timeout_s, "env.reset() for a reflection retry"))

    def _book_step(self, outcome: TurnOutcome) -> None:
        turn, tally = self.trajectory.turns[-1], self.tally
        turn.reward = outcome.reward
        turn.info.update(outcome.info)
        self.builder.set_last_reward(outcome.reward)
        tally.env_steps += 1
        if outcome.info.get("format_ok") is False:
            tally.format_errors += 1
        if outcome.success is not None:
            self.trajectory.success = outcome.success
        if tally.attempt == 1:
            tally.first_attempt = first_attempt_verdict(outcome.info, self.trajectory.success,
                                                        tally.first_attempt or FirstAttempt())
            self.trajectory.metadata["first_attempt_success"] = tally.first_attempt.success

    def _settle_reset(self, call: Call, outcome: CallOutcome) -> tuple[Call, ...]:
        """Reflection: the env was reset to the same seed; tell the model its answer was wrong."""
        if not outcome.ok:
            self._env_failed(outcome, call)
            return ()
        problem = reset_failure(outcome.value)
        if problem is not None:
            self._stop("env_error", problem)
            return ()
        self.tally.attempt += 1
        self.tally.turns_in_attempt = 0
        self.conversation.add_user(reflection_message(self.trajectory.turns[-1].info, outcome.value, self.settings,
                                                      self.tally.attempt))
        return self._turn_over()

    def _turn_over(self) -> tuple[Call, ...]:
        """The turn is over: ready for the next reply unless a budget is spent (the token budget
        first, then the turn budget of the current attempt)."""
        if self.done:
            return ()
        self._phase = Phase.READY
        budget = self.settings.max_context_tokens
        if budget is not None and self.tally.context_tokens >= budget:
            self._stop("token_budget")
        elif self.tally.turns_in_attempt >= self.settings.max_turns:
            self._stop("max_turns")
        return ()

    def _env_failed(self, outcome: CallOutcome, call: Call) -> None:
        if outcome.timed_out and self._live is not None:
            self._live.hung = True
        self._stop("env_timeout" if outcome.timed_out else "env_error", outcome.describe(call.label, call.timeout_s))

    # ----------------------------------------------------------------- the end
    def stats(self) -> EpisodeStats:
        """The episode's record so far (final once it is done)."""
        tally, limit = self.tally, self.settings.max_turns
        env_limit = self._live.turn_limit if self._live is not None else None
        first = tally.first_attempt.success if tally.first_attempt is not None else self.trajectory.success
        return EpisodeStats(
            episode_index=self.order, group_id=self._group_id, stop_reason=self._stop_reason,
            attempts=tally.attempt, generated_tokens=tally.generated_tokens, tokens_estimated=tally.tokens_estimated,
            context_tokens=tally.context_tokens, format_errors=tally.format_errors, env_steps=tally.env_steps,
            tool_calls=tally.tool_calls, turn_limit=limit, env_turn_limit=env_limit,
            cut_off=is_cut_off(self._stop_reason, limit, env_limit), first_attempt_success=first)

    def finish(self) -> Trajectory:
        """The finished trajectory, with its :class:`EpisodeStats` in its metadata and its token
        view(s).  The env stays open: run :meth:`close_call` next."""
        if self._phase is Phase.FINISHED:
            raise RuntimeError(f"EpisodeDriver.finish() twice (episode {self.spec.env_id} seed {self.spec.seed})")
        trajectory = self.trajectory
        trajectory.metadata.update(self.stats().to_metadata())
        self._phase, self._awaiting = Phase.FINISHED, ()
        trajectory.turn_views = self.builder.turn_views if self.builder.active else []
        try:
            trajectory.token_view = self.builder.build()
        except Exception as exc:  # noqa: BLE001 - an inconsistent view is dropped, the episode is kept
            trajectory.token_view = None
            self.builder.disable(f"building the token view raised {type(exc).__name__}: {exc}")
        if self.builder.error and (self.builder.turn_ends or self.builder.turn_views):
            trajectory.metadata["token_view_error"] = self.builder.error
        return trajectory

    def close_call(self) -> Call | None:
        """The env's ``close()``, for the engine to run without waiting (``workers.run_detached``);
        ``None`` when there is no env, or when a call on it hung (its close would hang too).  The driver
        lets go of the env either way."""
        live, self._live = self._live, None
        if live is None or live.hung:
            return None
        return Call(CallKind.CLOSE, live.env.close, (), None, "env.close()")


def _reset(env: Env, seed: int | None) -> Observation:
    observation, _info = env.reset(seed=seed)
    return observation

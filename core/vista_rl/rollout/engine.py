"""The multi-turn rollout engine: B envs x G samples, one batched model call per turn.

Each turn, every live episode's context goes to the backend in a single ``generate`` call; each
response is then either a tool call (run through the registered tools, results fed back as the next
message) or an action (passed raw to ``env.step``).  Env and tool calls run concurrently on a thread
pool with per-call timeouts, so one slow env does not serialise the batch and one hung or crashing
env ends only its own episode, with the reason in ``Trajectory.failure``.  Finished episodes are
yielded at once and replaced by new ones (continuous batching), so memory holds at most
``batch_size`` episodes whatever the run length.

What one reply leads to (tool-call checks and results, step result to turn outcome, reflection) is
decided by :mod:`vista_rl.rollout.turn`, which other engines (the verl agent loop) share; this
module keeps the batching, the pool and the timeouts.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.env import Env
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat, Message, Observation, escape_placeholders
from vista_rl.rollout.context import messages_after_last_assistant, tools_prompt, window
from vista_rl.rollout.metrics import FirstAttempt, first_attempt_verdict
from vista_rl.rollout.token_view import TokenViewBuilder
from vista_rl.rollout.turn import (
    ToolExecution,
    TurnOutcome,
    checked_tool_result,
    make_env_tools,
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

CHARS_PER_TOKEN = 4  # estimate used only when a backend reports no token ids


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: an env, a seed and which of the seed's ``group_size`` samples it is."""

    env_id: str
    seed: int | None
    sample_index: int = 0
    env_config: Mapping[str, Any] = field(default_factory=dict)
    group_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def episode_specs(
    env_id: str, seeds: Iterable[int | None], group_size: int = 1,
    env_config: Mapping[str, Any] | None = None,
) -> list[EpisodeSpec]:
    """``group_size`` samples of every seed, grouped by ``group_id`` (for GRPO-style baselines)."""
    config = dict(env_config or {})
    return [
        EpisodeSpec(env_id, seed, sample, config, group_id=f"{env_id}:{seed}")
        for seed in seeds for sample in range(group_size)
    ]


@dataclass
class RolloutTimings:
    """Where rollout time went (cumulative over an engine's life).

    ``model_s`` is the model's own time: all of ``backend.generate``, less the framework work the
    backend reports doing inside it (a backend with a ``timings`` object carrying ``encode_s`` and
    ``finish_s``, such as the transformers backend: rendering, tokenizing, the image processor,
    decoding), which goes to ``backend_framework_s`` and so to ``overhead_s``."""

    model_s: float = 0.0
    backend_framework_s: float = 0.0
    generate_calls: int = 0
    model_turns: int = 0
    env_steps: int = 0
    tool_calls: int = 0
    episodes: int = 0
    wall_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.wall_s - self.model_s)

    def to_dict(self) -> dict[str, float | int]:
        return {"model_s": self.model_s, "backend_framework_s": self.backend_framework_s,
                "generate_calls": self.generate_calls, "model_turns": self.model_turns,
                "env_steps": self.env_steps, "tool_calls": self.tool_calls, "episodes": self.episodes,
                "wall_s": self.wall_s, "overhead_s": self.overhead_s}


@dataclass
class _Episode:
    """Mutable state of one live episode (private to the engine)."""

    order: int
    spec: EpisodeSpec
    trajectory: Trajectory
    env: Env | None = None
    system: Message | None = None
    history: list[Message] = field(default_factory=list)
    images_seen: list[Image.Image] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict)
    builder: TokenViewBuilder = field(default_factory=TokenViewBuilder)
    attempt: int = 1
    turns_in_attempt: int = 0
    generated_tokens: int = 0
    tokens_estimated: bool = False
    context_tokens: int = 0
    format_errors: int = 0
    env_steps: int = 0
    tool_call_count: int = 0
    done: bool = False
    stop_reason: str = ""
    oracle: str | None = None
    needs_reset: bool = False
    env_hung: bool = False
    first_attempt: FirstAttempt = field(default_factory=FirstAttempt)

    def chat(self, window_size: int | None) -> Chat:
        system = [self.system] if self.system is not None else []
        return system + window(self.history, window_size)

    def fail(self, reason: str, stop_reason: str) -> None:
        self.trajectory.failure = reason
        self.done, self.stop_reason = True, stop_reason

    def add_user(self, message: Message) -> None:
        self.history.append(message)
        self.images_seen.extend(message.images)


class RolloutEngine:
    """Runs episodes against a model backend.  Thread-safe for one caller at a time.

    ``settings`` is the run config's ``rollout`` section; ``seed`` (the run seed) goes into the
    sampling parameters; ``tools`` adds tools by name on top of those each env declares.  A trainer
    may replace ``engine.sampling`` between calls (e.g. a new seed per step) and reuse the engine.
    """

    def __init__(
        self,
        backend: ModelBackend,
        settings: RolloutSection | None = None,
        *,
        seed: int | None = None,
        tools: Mapping[str, Tool] | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings or RolloutSection()
        sampling = self.settings.sampling
        self.sampling = SamplingParams(**sampling.model_dump(), n=1, seed=seed)
        self.extra_tools = dict(tools or {})
        self.timings = RolloutTimings()
        self._pool = CallPool(self.settings.max_workers or self.settings.batch_size)
        self._tool_cache: dict[str, Tool] = {}
        self._tool_lock = threading.Lock()
        self._needs_oracle = bool(getattr(backend, "needs_oracle", False))
        self.end_tokens: set[int] = _backend_end_tokens(backend)

    # ---------------------------------------------------------------- public API
    def run(self, episodes: Iterable[EpisodeSpec]) -> list[Trajectory]:
        """Every trajectory, in the order of ``episodes`` (holds them all: prefer :meth:`stream`
        for long runs)."""
        return list(self.stream(episodes, ordered=True))

    def stream(self, episodes: Iterable[EpisodeSpec], ordered: bool = False) -> Iterator[Trajectory]:
        """Yield trajectories as episodes finish (or in input order with ``ordered=True``, which
        holds finished ones until their predecessors are done)."""
        finished = self._stream(episodes)
        if not ordered:
            yield from finished
            return
        waiting: dict[int, Trajectory] = {}
        next_index = 0
        for trajectory in finished:
            waiting[trajectory.metadata["episode_index"]] = trajectory
            while next_index in waiting:
                yield waiting.pop(next_index)
                next_index += 1

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> RolloutEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------- the loop
    def _stream(self, episodes: Iterable[EpisodeSpec]) -> Iterator[Trajectory]:
        pending = enumerate(episodes)
        live: list[_Episode] = []
        exhausted = False
        started = time.perf_counter()
        try:
            while True:
                if not exhausted and len(live) < self.settings.batch_size:
                    wanted = self.settings.batch_size - len(live)
                    batch = list(itertools.islice(pending, wanted))
                    exhausted = len(batch) < wanted
                    for episode in self._open(batch):
                        if episode.done:
                            yield self._finish(episode)
                        else:
                            live.append(episode)
                if not live:
                    break
                self._turn(live)
                still: list[_Episode] = []
                for episode in live:
                    if episode.done:
                        yield self._finish(episode)
                    else:
                        still.append(episode)
                live = still
        finally:
            for episode in live:
                self._close_env(episode)
            self.timings.wall_s += time.perf_counter() - started

    # ------------------------------------------------------------- episode start
    def _tools_for(self, env: Env) -> dict[str, Tool]:
        tools = make_env_tools(env.tools, self.settings.tools, self._tool_cache, self._tool_lock)
        tools.update(self.extra_tools)
        return tools

    def _open_env(self, spec: EpisodeSpec) -> tuple[Env, Observation, dict[str, Any], str, dict[str, Tool]]:
        env = vista_rl.make_env(spec.env_id, **dict(spec.env_config))
        try:
            observation, info = env.reset(seed=spec.seed)
            if not isinstance(observation, Observation):
                raise TypeError(f"reset() returned {type(observation).__name__}, not an Observation")
            return env, observation, dict(info or {}), env.system_prompt(), self._tools_for(env)
        except BaseException:
            env.close()
            raise

    def _open(self, batch: Sequence[tuple[int, EpisodeSpec]]) -> list[_Episode]:
        calls = [(index, spec, self._pool.submit(self._open_env, spec)) for index, spec in batch]
        episodes = []
        for index, spec, call in calls:
            trajectory = Trajectory(env_id=spec.env_id, seed=spec.seed, sample_index=spec.sample_index)
            trajectory.metadata.update(dict(spec.metadata))
            trajectory.metadata.update(episode_index=index, group_id=spec.group_id or f"{spec.env_id}:{spec.seed}")
            episode = _Episode(order=index, spec=spec, trajectory=trajectory,
                               builder=TokenViewBuilder(per_turn=self.settings.per_turn_sequences))
            outcome = self._pool.wait(call, self.settings.env_timeout_s)
            if not outcome.ok:
                episode.fail(outcome.describe(f"starting env {spec.env_id} (make, reset, system_prompt)",
                                              self.settings.env_timeout_s), "env_error")
            else:
                env, observation, info, prompt, tools = outcome.value
                episode.env, episode.tools = env, tools
                try:
                    self._start(episode, observation, info, prompt, tools)
                except Exception as exc:  # noqa: BLE001 - e.g. a tool whose schema cannot be built
                    episode.fail(f"starting env {spec.env_id} failed: {type(exc).__name__}: {exc}", "env_error")
            episodes.append(episode)
        return episodes

    def _start(self, episode: _Episode, observation: Observation, info: dict[str, Any], prompt: Any,
               tools: dict[str, Tool]) -> None:
        prompt = prompt if isinstance(prompt, str) else str(prompt or "")
        if tools and self.settings.describe_tools:
            prompt = (prompt + "\n\n" if prompt else "") + tools_prompt(tools)
        episode.system = Message("system", escape_placeholders(prompt)) if prompt else None
        trajectory = episode.trajectory
        trajectory.system_prompt = prompt
        trajectory.initial_observation = observation.text
        trajectory.initial_images = list(observation.images)
        trajectory.metadata["reset_info"] = info
        episode.add_user(Message.from_observation(observation))

    # ------------------------------------------------------------------ one turn
    def _turn(self, live: list[_Episode]) -> None:
        if self._needs_oracle:
            self._ask_oracles(live)
        active = [episode for episode in live if not episode.done]
        if not active:
            return
        chats = [episode.chat(self.settings.window_size) for episode in active]
        outputs = self._generate(active, chats)
        if outputs is None:
            return
        jobs: list[tuple[_Episode, str, Any]] = []
        for position, (episode, chat) in enumerate(zip(active, chats, strict=True)):
            generation = _pick(outputs, position)
            if isinstance(generation, str):
                episode.fail(generation, "model_error")
                continue
            try:
                jobs.extend(self._respond(episode, chat, generation))
            except Exception as exc:  # noqa: BLE001 - one bad output fails its own episode, not the batch
                episode.fail(f"handling the model's response raised {type(exc).__name__}: {exc}", "model_error")
        self._collect(jobs)
        resets = [episode for episode in active if episode.needs_reset and not episode.done]
        if resets:
            self._retry(resets)
        for episode in active:
            if episode.done:
                continue
            budget = self.settings.max_context_tokens
            if budget is not None and episode.context_tokens >= budget:
                episode.done, episode.stop_reason = True, "token_budget"
            elif episode.turns_in_attempt >= self.settings.max_turns:
                episode.done, episode.stop_reason = True, "max_turns"

    def _ask_oracles(self, live: list[_Episode]) -> None:
        calls = [(episode, self._pool.submit(_oracle, episode.env)) for episode in live if not episode.done]
        for episode, call in calls:
            outcome = self._pool.wait(call, self.settings.env_timeout_s)
            if outcome.ok:
                episode.oracle = outcome.value
            else:
                self._env_failed(episode, outcome, "env.oracle_response()")

    def _generate(self, active: list[_Episode], chats: list[Chat]) -> Any:
        kwargs: dict[str, Any] = {}
        if self._needs_oracle:
            kwargs["oracle_responses"] = [episode.oracle for episode in active]
        started = time.perf_counter()
        framework_before = _backend_framework_s(self.backend)
        outputs: list[Any] | None
        try:
            outputs = self.backend.generate(chats, self.sampling, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a backend failure ends this turn's episodes, not the run
            outputs = self._generate_each(chats, kwargs, exc)
            if outputs is None:
                reason = f"model backend raised {type(exc).__name__}: {exc}"
                for episode in active:
                    episode.fail(reason, "model_error")
                return None
        finally:
            elapsed = time.perf_counter() - started
            framework = min(max(_backend_framework_s(self.backend) - framework_before, 0.0), elapsed)
            self.timings.model_s += elapsed - framework
            self.timings.backend_framework_s += framework
            self.timings.generate_calls += 1
        self.timings.model_turns += len(active)
        return outputs

    def _generate_each(self, chats: list[Chat], kwargs: dict[str, Any], error: Exception) -> list[Any] | None:
        """After a failed batched call: one chat at a time, so that one bad chat (a prompt the
        server rejects) fails alone.  If the first chat alone fails the same way, the backend itself
        is down: ``None``, and the whole turn fails without calling it once per chat."""
        if len(chats) < 2:
            return None
        outputs: list[Any] = []
        for index, chat in enumerate(chats):
            single = {key: [value[index]] for key, value in kwargs.items()}
            try:
                result = self.backend.generate([chat], self.sampling, **single)
                outputs.append(result[0])
            except Exception as exc:  # noqa: BLE001 - recorded on this chat's episode
                if index == 0 and type(exc) is type(error) and str(exc) == str(error):
                    return None
                outputs.append(exc)
        return outputs

    def _respond(self, episode: _Episode, chat: Chat, generation: Generation) -> list[tuple[_Episode, str, Any]]:
        """Record the response and return the env/tool calls it asks for."""
        text = generation.text if isinstance(generation.text, str) else str(generation.text)
        current = episode.history[-1]
        turn = Turn(observation=current.content, response=text, images=list(current.images),
                    observation_role=current.role)
        turn.info["finish_reason"] = str(getattr(generation, "finish_reason", ""))
        episode.trajectory.turns.append(turn)
        episode.turns_in_attempt += 1
        self._account_tokens(episode, chat, generation, text)
        episode.history.append(Message("assistant", escape_placeholders(text)))

        tool_calls, parse_error = parse_tool_calls(text, episode.tools)
        if parse_error is not None:
            episode.trajectory.turns[-1].error = parse_error
        if tool_calls:
            return self._submit_tools(episode, tool_calls)
        assert episode.env is not None
        return [(episode, "step", self._pool.submit(episode.env.step, text))]

    def _account_tokens(self, episode: _Episode, chat: Chat, generation: Generation, text: str) -> None:
        token_ids = list(getattr(generation, "token_ids", None) or [])
        prompt_ids = getattr(generation, "prompt_token_ids", None)
        finish_reason = str(getattr(generation, "finish_reason", "stop"))
        if token_ids:
            episode.generated_tokens += len(token_ids)
        else:
            episode.generated_tokens += len(text) // CHARS_PER_TOKEN
            episode.tokens_estimated = True
        if prompt_ids is not None:
            episode.context_tokens = len(prompt_ids) + len(token_ids)
        else:
            chars = sum(len(message.content) for message in chat) + len(text)
            episode.context_tokens = chars // CHARS_PER_TOKEN
        if episode.builder.active:
            added = chat if episode.builder.per_turn else messages_after_last_assistant(chat)
            new_images = [image for message in added for image in message.images]
            refs = [image_hash(image) for image in new_images] if prompt_ids is not None else []
            encoded = getattr(generation, "encoded_images", None)  # the prompt's images: the new ones last
            new_inputs = (list(encoded)[len(encoded) - len(new_images):]
                          if isinstance(encoded, list) and len(encoded) >= len(new_images) else None)
            episode.builder.add_turn(prompt_ids, getattr(generation, "token_ids", None),
                                     getattr(generation, "logprobs", None), finish_reason, new_images, refs, text,
                                     self.end_tokens, new_inputs)
        if token_ids and finish_reason == "stop" and not self.sampling.stop:
            self.end_tokens.add(int(token_ids[-1]))  # a "stop" without stop strings ended on an EOS token

    def _submit_tools(self, episode: _Episode, calls: Sequence[Any]) -> list[tuple[_Episode, str, Any]]:
        """Rejected calls get their error result now (see ``rejected_tool_call``); the rest run
        on the pool, their results checked in ``_collect``."""
        jobs: list[tuple[_Episode, str, Any]] = []
        context = tool_context(episode.env, episode.images_seen,
                               {"env_id": episode.spec.env_id, "seed": episode.spec.seed})
        for index, call in enumerate(calls):
            name = call.name or "?"
            arguments = call.arguments if call.error is None else None
            result: ToolResult | PendingCall | None = rejected_tool_call(call, index, episode.tools)
            if result is None:
                result = self._pool.submit(episode.tools[call.name], call.arguments, context)
            jobs.append((episode, "tool", (name, arguments, result)))
        return jobs

    # --------------------------------------------------------- results of a turn
    def _collect(self, jobs: list[tuple[_Episode, str, Any]]) -> None:
        executions: dict[int, list[ToolExecution]] = {}
        tool_episodes: dict[int, _Episode] = {}
        for episode, kind, payload in jobs:  # submission order: see CallPool
            if kind == "step":
                outcome = self._pool.wait(payload, self.settings.env_timeout_s)
                self.timings.env_steps += 1
                if not outcome.ok:
                    self._env_failed(episode, outcome, "env.step()")
                else:
                    self._apply(episode, step_outcome(outcome.value, self.settings, episode.attempt))
                continue
            name, arguments, result = payload
            self.timings.tool_calls += 1
            if isinstance(result, PendingCall):
                outcome = self._pool.wait(result, self.settings.tool_timeout_s)
                if outcome.timed_out:  # the worker thread is stuck: end the episode, not just the call
                    if not episode.done:
                        episode.fail(outcome.describe(f"tool {name}", self.settings.tool_timeout_s), "tool_timeout")
                    continue
                result = checked_tool_result(name, outcome.error if outcome.error is not None else outcome.value)
            execution = ToolExecution(name, arguments, result)
            episode.trajectory.turns[-1].tool_calls.append(execution.record())
            episode.tool_call_count += 1
            executions.setdefault(id(episode), []).append(execution)
            tool_episodes[id(episode)] = episode
        for key, done in executions.items():
            episode = tool_episodes[key]
            if not episode.done:
                self._apply(episode, tool_outcome(done, self.settings.tool_response_role))

    def _apply(self, episode: _Episode, outcome: TurnOutcome) -> None:
        """Book one reply's outcome (see ``vista_rl.rollout.turn``) on its episode."""
        if outcome.failure is not None:
            episode.fail(outcome.failure, outcome.stop_reason)
            return
        if outcome.tool_calls:
            assert outcome.observation is not None
            episode.add_user(outcome.observation)
            return
        turn = episode.trajectory.turns[-1]
        turn.reward = outcome.reward
        turn.info.update(outcome.info)
        episode.builder.set_last_reward(outcome.reward)
        episode.env_steps += 1
        if outcome.info.get("format_ok") is False:
            episode.format_errors += 1
        if outcome.success is not None:
            episode.trajectory.success = outcome.success
        if episode.attempt == 1:
            episode.first_attempt = first_attempt_verdict(outcome.info, episode.trajectory.success,
                                                          episode.first_attempt)
            episode.trajectory.metadata["first_attempt_success"] = episode.first_attempt.success
        if outcome.observation is not None:
            episode.add_user(outcome.observation)
            return
        episode.trajectory.metadata["final_observation"] = outcome.final_observation
        if outcome.retry:
            episode.needs_reset = True
            episode.trajectory.metadata["reflection_reason"] = outcome.info.get("reflection_feedback", "")
        else:
            episode.done, episode.stop_reason = True, outcome.stop_reason

    def _retry(self, episodes: list[_Episode]) -> None:
        """Reflection: reset the env to the same seed and tell the model its answer was wrong."""
        calls = [(episode, self._pool.submit(_reset, episode.env, episode.spec.seed)) for episode in episodes]
        for episode, call in calls:
            episode.needs_reset = False
            outcome = self._pool.wait(call, self.settings.env_timeout_s)
            if not outcome.ok:
                self._env_failed(episode, outcome, "env.reset() for a reflection retry")
                continue
            problem = reset_failure(outcome.value)
            if problem is not None:
                episode.fail(problem, "env_error")
                continue
            episode.attempt += 1
            episode.turns_in_attempt = 0
            episode.add_user(reflection_message(episode.trajectory.turns[-1].info, outcome.value, self.settings,
                                                episode.attempt))

    def _env_failed(self, episode: _Episode, outcome: CallOutcome, what: str) -> None:
        if outcome.timed_out:
            episode.env_hung = True
        episode.fail(outcome.describe(what, self.settings.env_timeout_s),
                     "env_timeout" if outcome.timed_out else "env_error")

    # --------------------------------------------------------------- the end
    def _finish(self, episode: _Episode) -> Trajectory:
        trajectory = episode.trajectory
        trajectory.metadata.update(
            stop_reason=episode.stop_reason, attempts=episode.attempt, generated_tokens=episode.generated_tokens,
            tokens_estimated=episode.tokens_estimated, context_tokens=episode.context_tokens,
            format_errors=episode.format_errors, env_steps=episode.env_steps, tool_calls=episode.tool_call_count,
        )
        trajectory.metadata.setdefault("first_attempt_success", trajectory.success)
        trajectory.turn_views = episode.builder.turn_views if episode.builder.active else []
        try:
            trajectory.token_view = episode.builder.build()
        except Exception as exc:  # noqa: BLE001 - an inconsistent view is dropped, the episode is kept
            trajectory.token_view = None
            episode.builder.disable(f"building the token view raised {type(exc).__name__}: {exc}")
        if episode.builder.error and (episode.builder.turn_ends or episode.builder.turn_views):
            trajectory.metadata["token_view_error"] = episode.builder.error
        self._close_env(episode)
        self.timings.episodes += 1
        return trajectory

    def _close_env(self, episode: _Episode) -> None:
        """Close on a separate daemon thread: ``close()`` of a misbehaving env may hang too."""
        env, episode.env = episode.env, None
        if env is not None and not episode.env_hung:
            threading.Thread(target=_quiet_close, args=(env,), daemon=True).start()


def _pick(outputs: Any, position: int) -> Generation | str:
    """The first sample for chat ``position``, or a reason why the backend's output has none."""
    try:
        samples = outputs[position]
        if isinstance(samples, BaseException):
            return f"model backend raised {type(samples).__name__}: {samples}"
        generation = samples[0]
    except (IndexError, KeyError, TypeError):
        return f"model backend returned no generation for chat {position} (output: {type(outputs).__name__})"
    if isinstance(generation, Generation):
        return generation
    if isinstance(generation, str):
        return Generation(text=generation)
    return Generation(text=str(getattr(generation, "text", generation)))


def _backend_end_tokens(backend: ModelBackend) -> set[int]:
    """End-of-turn token ids the backend can tell us about (see ``vista_rl.rollout.token_view``)."""
    declared = getattr(backend, "stop_token_ids", None)
    if declared:
        return {int(token) for token in declared}
    eos = getattr(getattr(backend, "tokenizer", None), "eos_token_id", None)
    if isinstance(eos, int):
        return {eos}
    if isinstance(eos, (list, tuple)):
        return {int(token) for token in eos}
    return set()


def _backend_framework_s(backend: ModelBackend) -> float:
    """Seconds the backend reports spending on framework work inside ``generate`` so far (0 when
    it reports nothing)."""
    timings = getattr(backend, "timings", None)
    try:
        return float(getattr(timings, "encode_s", 0.0)) + float(getattr(timings, "finish_s", 0.0))
    except (TypeError, ValueError):
        return 0.0


def _oracle(env: Env) -> str | None:
    return env.oracle_response()


def _reset(env: Env, seed: int | None) -> Observation:
    observation, _info = env.reset(seed=seed)
    return observation


def _quiet_close(env: Env) -> None:
    with contextlib.suppress(Exception):  # closing is best effort; the episode is already recorded
        env.close()

"""The multi-turn rollout engine: B envs x G samples, one batched model call per turn.

Each turn, every live episode's context goes to the backend in a single ``generate`` call; each
response is then either a tool call (run through the registered tools, results fed back as the next
message) or an action (passed raw to ``env.step``).  Env and tool calls run concurrently on a thread
pool with per-call timeouts, so one slow env does not serialise the batch and one hung or crashing
env ends only its own episode, with the reason in ``Trajectory.failure``.  Finished episodes are
yielded at once and replaced by new ones (continuous batching), so memory holds at most
``batch_size`` episodes whatever the run length.

One episode's life (start, context window, turn bookkeeping, reflection, the finished trajectory)
is :class:`vista_rl.rollout.episode.EpisodeDriver`, which the verl agent loop drives too; it does no
I/O but returns the env and tool calls it needs as data (:class:`~vista_rl.rollout.calls.Call`).
What one reply leads to is decided by :mod:`vista_rl.rollout.turn`.  This module keeps the batching
and the waiting: one ``generate`` call for every live episode, every episode's calls submitted to the
shared pool (with their timeouts) before any is waited on, round after round (the reply's step or
tools, then an observe or a reflection reset), and continuous replacement of finished episodes.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vista_rl.config import RolloutSection
from vista_rl.env import Env
from vista_rl.model import EpisodeStateBackend, Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat
from vista_rl.rollout.calls import Call, CallKind
from vista_rl.rollout.episode import CHARS_PER_TOKEN, EpisodeDriver, EpisodeSpec, TurnKey
from vista_rl.rollout.stats import EpisodeStats
from vista_rl.rollout.turn import make_env_tools
from vista_rl.rollout.workers import CallPool, run_detached
from vista_rl.tool import Tool
from vista_rl.trajectory import Trajectory

__all__ = ["CHARS_PER_TOKEN", "EpisodeSpec", "RolloutEngine", "RolloutTimings", "episode_specs"]


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


class RolloutEngine:
    """Runs episodes against a model backend.  Thread-safe for one caller at a time.

    ``settings`` is the run config's ``rollout`` section; ``seed`` (the run seed) goes into the
    sampling parameters (``engine.sampling``, the default of every call); ``tools`` adds tools by name
    on top of those each env declares.  A trainer passes each call its own ``sampling`` (e.g. a new
    seed per step) and reuses the engine; nothing a call samples with outlives the call.

    A backend with ``needs_oracle`` gets, beside each chat, a reply drawn from that episode's env
    (``oracle_responses``): its ``env_reply(env, TurnKey)`` when it has one (``scripted:random``), else
    the env's ``oracle_response()``.

    A backend that keeps state per episode (:class:`~vista_rl.model.EpisodeStateBackend`, e.g. a KV
    cache kept between turns) gets each chat's episode key (``episode_keys``) and is told when each
    episode ends, at once (``end_episodes``), including episodes left when a stream is closed early.
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
        reply = getattr(backend, "env_reply", None)
        self._env_reply: Callable[[Env, TurnKey], str | None] = reply if callable(reply) else _oracle
        self._env_reply_name = "the backend's env_reply()" if callable(reply) else "env.oracle_response()"
        self.end_tokens: set[int] = _backend_end_tokens(backend)
        self._keeps_episodes = isinstance(backend, EpisodeStateBackend)

    # ---------------------------------------------------------------- public API
    def run(self, episodes: Iterable[EpisodeSpec], sampling: SamplingParams | None = None) -> list[Trajectory]:
        """Every trajectory, in the order of ``episodes`` (holds them all: prefer :meth:`stream`
        for long runs), sampled with ``sampling`` (default: ``engine.sampling``)."""
        return list(self.stream(episodes, ordered=True, sampling=sampling))

    def stream(self, episodes: Iterable[EpisodeSpec], ordered: bool = False,
               sampling: SamplingParams | None = None,
               image_sink: Callable[[list[Image.Image]], None] | None = None) -> Iterator[Trajectory]:
        """Yield trajectories as episodes finish (or in input order with ``ordered=True``, which
        holds finished ones until their predecessors are done), sampled with ``sampling`` (default:
        ``engine.sampling``).  ``image_sink`` is handed each turn's new observation images just
        before the model is called (:meth:`~vista_rl.store.RunWriter.write_images`), so a run
        writer encodes them while the model works."""
        finished = self._stream(episodes, sampling or self.sampling, image_sink)
        if not ordered:
            yield from finished
            return
        waiting: dict[int, Trajectory] = {}
        next_index = 0
        for trajectory in finished:
            index = EpisodeStats.from_metadata(trajectory.metadata).episode_index
            assert index is not None, "the episode driver writes every trajectory's episode_index"
            waiting[index] = trajectory
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
    def _stream(self, episodes: Iterable[EpisodeSpec], sampling: SamplingParams,
                image_sink: Callable[[list[Image.Image]], None] | None = None) -> Iterator[Trajectory]:
        """Each episode leaves ``live`` (or ``ending``) before it is finished and yielded, so that one
        the consumer never took (a stream closed early) is ended and closed here, once."""
        pending = enumerate(episodes)
        live: list[EpisodeDriver] = []
        ending: list[EpisodeDriver] = []
        exhausted = False
        started = time.perf_counter()
        try:
            while True:
                if not exhausted and len(live) < self.settings.batch_size:
                    wanted = self.settings.batch_size - len(live)
                    batch = list(itertools.islice(pending, wanted))
                    exhausted = len(batch) < wanted
                    for episode in self._open(batch, sampling):
                        (ending if episode.done else live).append(episode)
                    while ending:
                        yield self._finish(ending.pop(0))
                if not live:
                    break
                self._turn(live, sampling, image_sink)
                ending = [episode for episode in live if episode.done]
                live = [episode for episode in live if not episode.done]
                while ending:
                    yield self._finish(ending.pop(0))
        finally:
            left = ending + live
            self._end_episodes(left)
            for episode in left:
                run_detached(episode.close_call())
            self.timings.wall_s += time.perf_counter() - started

    # ------------------------------------------------------------- episode start
    def _tools_for(self, env: Env) -> dict[str, Tool]:
        tools = make_env_tools(env.tools, self.settings.tools, self._tool_cache, self._tool_lock)
        tools.update(self.extra_tools)
        return tools

    def _open(self, batch: Sequence[tuple[int, EpisodeSpec]], sampling: SamplingParams) -> list[EpisodeDriver]:
        """Start a batch of episodes, their envs made and reset concurrently on the pool."""
        drivers = [EpisodeDriver(spec, self.settings, order=index, end_tokens=self.end_tokens,
                                 stop_strings=bool(sampling.stop)) for index, spec in batch]
        outcomes = self._pool.run_calls([driver.open_call(self._tools_for) for driver in drivers])
        for driver, outcome in zip(drivers, outcomes, strict=True):
            driver.start(outcome)
        return drivers

    # ------------------------------------------------------------------ one turn
    def _turn(self, live: list[EpisodeDriver], sampling: SamplingParams,
              image_sink: Callable[[list[Image.Image]], None] | None = None) -> None:
        oracles = self._ask_oracles(live, sampling.seed) if self._needs_oracle else {}
        active = [episode for episode in live if not episode.done]
        if not active:
            return
        chats = [episode.chat() for episode in active]
        if image_sink is not None:  # the newest message holds what this turn's observation or tool added
            image_sink([image for chat in chats if chat for image in chat[-1].images])
        outputs = self._generate(active, chats, oracles, sampling)
        if outputs is None:
            return
        requests: list[tuple[EpisodeDriver, tuple[Call, ...]]] = []
        for position, (episode, chat) in enumerate(zip(active, chats, strict=True)):
            generation = _pick(outputs, position)
            if isinstance(generation, str):
                episode.fail(generation, "model_error")
                continue
            calls = episode.respond(chat, generation)
            self.timings.env_steps += sum(1 for call in calls if call.kind is CallKind.STEP)
            self.timings.tool_calls += episode.tool_calls_asked
            if calls:
                requests.append((episode, calls))
        self._run_rounds(requests)

    def _run_rounds(self, requests: list[tuple[EpisodeDriver, tuple[Call, ...]]]) -> None:
        """Each round, every episode's calls are submitted before any is waited on, then waited on in
        submission order (see :class:`CallPool`); what they lead to (an observe, a reset) is the next
        round."""
        while requests:
            submitted = [(episode, calls, self._pool.submit_calls(calls)) for episode, calls in requests]
            requests = []
            for episode, calls, pending in submitted:
                more = episode.settle(self._pool.wait_calls(calls, pending))
                if more:
                    requests.append((episode, more))

    def _ask_oracles(self, live: list[EpisodeDriver], seed: int | None) -> dict[str, str | None]:
        """This turn's env-drawn reply of each live episode, by episode key (a failure ends its episode)."""
        asking = [episode for episode in live if not episode.done]
        calls = [episode.oracle_call(self._env_reply, seed, self._env_reply_name) for episode in asking]
        outcomes = self._pool.run_calls(calls)
        return {episode.key: episode.oracle_reply(outcome) for episode, outcome in zip(asking, outcomes, strict=True)}

    def _generate(self, active: list[EpisodeDriver], chats: list[Chat], oracles: dict[str, str | None],
                  sampling: SamplingParams) -> Any:
        kwargs: dict[str, Any] = {}
        if self._needs_oracle:
            kwargs["oracle_responses"] = [oracles.get(episode.key) for episode in active]
        if self._keeps_episodes:
            kwargs["episode_keys"] = [episode.key for episode in active]
        started = time.perf_counter()
        framework_before = _backend_framework_s(self.backend)
        outputs: list[Any] | None
        try:
            outputs = self.backend.generate(chats, sampling, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a backend failure ends this turn's episodes, not the run
            outputs = self._generate_each(chats, kwargs, exc, sampling)
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

    def _generate_each(self, chats: list[Chat], kwargs: dict[str, Any], error: Exception,
                       sampling: SamplingParams) -> list[Any] | None:
        """After a failed batched call: one chat at a time, so that one bad chat (a prompt the
        server rejects) fails alone.  If the first chat alone fails the same way, the backend itself
        is down: ``None``, and the whole turn fails without calling it once per chat."""
        if len(chats) < 2:
            return None
        outputs: list[Any] = []
        for index, chat in enumerate(chats):
            single = {key: [value[index]] for key, value in kwargs.items()}
            try:
                result = self.backend.generate([chat], sampling, **single)
                outputs.append(result[0])
            except Exception as exc:  # noqa: BLE001 - recorded on this chat's episode
                if index == 0 and type(exc) is type(error) and str(exc) == str(error):
                    return None
                outputs.append(exc)
        return outputs

    # --------------------------------------------------------------- the end
    def _finish(self, episode: EpisodeDriver) -> Trajectory:
        self.timings.episodes += 1
        self._end_episodes([episode])
        trajectory = episode.finish()
        run_detached(episode.close_call())
        return trajectory

    def _end_episodes(self, episodes: Sequence[EpisodeDriver]) -> None:
        """Tell a backend that keeps per-episode state that these episodes are over (each episode
        once: ``_stream`` hands each here once).  Its failure to free them is a warning, never the
        run's end (the state is only a cache)."""
        if not self._keeps_episodes or not episodes:
            return
        try:
            self.backend.end_episodes([episode.key for episode in episodes])  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - freeing a cache must not fail episodes
            warnings.warn(f"the model backend's end_episodes raised {type(exc).__name__}: {exc}", stacklevel=2)


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


def _oracle(env: Env, _key: TurnKey) -> str | None:
    return env.oracle_response()

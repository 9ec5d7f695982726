"""``VistaAgentLoop``: any vista env, multi-turn with tools and images, as a verl agent loop.

verl instantiates the loop once per sample and calls ``run``; the dataset row (see ``dataset``)
names the env, its config, the seed and the run's rollout keys in ``extra_info``.  The episode
itself (env start, system prompt with tool schemas, turn records, env/tool timeouts, reflection,
budgets, the trajectory) is :class:`vista_rl.rollout.EpisodeDriver`, the same object
``RolloutEngine`` drives, so verl trains exactly the episodes ``vista eval`` runs.  This module owns
only what is verl's: generating through verl's token-in/token-out server, merging tokens with verl's
Continuous Token builder (mask 1 on generated tokens, 0 on observations) and verl's output shapes.

``run`` is an explicit state machine, like verl's own ``ToolAgentLoop``::

    PENDING ──(env started, prompt tokens built)──> GENERATING ──(reply merged)──> PROCESSING
       │                                                ^                              │
       └──(env failed to start: raises)                 └──(observation merged)────────┤
                                                                                       v
                                                                                  TERMINATED

Whole conversations (``rollout.sequences`` episode) come back as one ``AgentLoopOutput``: the turns
merged with mask 1 on replies, 0 on observations.  Per-turn sequences (``rollout.sequences: turn``,
or ``window_size: 0``) come back as a list, one output per turn: its prompt exactly the (windowed)
context the model answered, its response that turn's reply, as the local engine's per-turn samples
(``Trajectory.turn_views``).  verl's v1 trainer stores each as its own row keyed
``{uid}_{session}_{turn}`` (``verl/trainer/ppo/v1/agent_loop_tq.py:150-226``); each carries its
turn's reward and index in ``extra_fields`` and the advantage bridge (``estimators``) groups them by
session as the local engine does.  A context window with whole-episode sequences (``window_size``
above 0, ``sequences`` auto) is one concatenated sequence the model never saw as such; the loop
refuses it (:data:`WINDOW_REFUSAL`) and the dry run refuses the config first.

A failed episode (env, tool or model error) is left out of the update as the local engine leaves it
out: its rows carry ``vista_failure`` and an all-zero ``response_mask`` (no token trained).

Each reply is capped at ``rollout.sampling.max_tokens`` (and the episode's remaining response budget)
and stopped at ``rollout.sampling.stop``: both go into every generate call's sampling params.

The driver does no I/O: it returns the env and tool calls it needs as data, and this loop runs them
on a per-process :class:`~vista_rl.rollout.workers.CallPool` (with the run's timeouts) and awaits
them on the event loop itself (:meth:`CallPool.run_calls_async`: the worker wakes the loop, no thread
waits), so a slow env never blocks the other samples; an env that raises or hangs ends its episode
with the reason in ``vista_failure``.
Replies are decoded keeping special tokens (``<answer>`` may be one), dropping only end/pad tokens.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from PIL import Image
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

import vista_rl
from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_plugin_verl.dataset import rollout_from_row
from vista_rl import Chat, Env, Generation, Message, Tool, Trajectory
from vista_rl.config import RolloutSection
from vista_rl.rollout import (
    Call,
    CallOutcome,
    CallPool,
    EpisodeDriver,
    EpisodeSpec,
    EpisodeStats,
    make_env_tools,
    run_detached,
)

logger = logging.getLogger(__name__)

POOL_WORKERS = 64

WINDOW_REFUSAL = ("rollout.window_size: a context window with one sequence per episode concatenates turns the "
                  "model never saw together; set rollout.sequences: turn (one row per turn, each with the exact "
                  "context it answered) or rollout.window_size: null")


class Phase(enum.Enum):
    """Where one sample's loop is (see the module doc)."""

    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING = "processing"
    TERMINATED = "terminated"


def hf_message(message: Message) -> dict[str, Any]:
    """A vista chat message in the HF content-part form verl's builders and processors read."""
    chat = message.to_chat("hf")
    if isinstance(chat["content"], list):
        for part in chat["content"]:
            if part["type"] == "image":
                part["image"] = part["image"].convert("RGB")
    return chat


def hf_messages(chat: Chat) -> list[dict[str, Any]]:
    return [hf_message(message) for message in chat]


def _images_of(message: dict[str, Any]) -> list[Image.Image]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [part["image"] for part in content if part.get("type") == "image"]


def end_token_ids(tokenizer: Any) -> set[int]:
    """Ids that end a reply or pad it: never part of the text the env sees."""
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    for token in ("<|im_end|>", "<|endoftext|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            ids.add(token_id)
    return {int(token_id) for token_id in ids if isinstance(token_id, int)}


def reply_text(tokenizer: Any, token_ids: list[int], end_ids: set[int]) -> str:
    """The reply as the env sees it: special tokens kept (the answer grammar may use them, as the
    local engine keeps them), end-of-turn and pad tokens dropped."""
    return str(tokenizer.decode([i for i in token_ids if i not in end_ids], skip_special_tokens=False))


def finish_reason(token_ids: list[int], stop_reason: str | None, end_ids: set[int]) -> str:
    """verl's ``stop_reason`` ("completed", "aborted") in vista's terms ("stop", "length", "abort")."""
    if stop_reason == "aborted":
        return "abort"
    return "stop" if token_ids and token_ids[-1] in end_ids else "length"


@dataclass
class TurnRow:
    """One turn as its own training row: the exact context, the images in it, and the reply."""

    prompt_ids: list[int]
    images: list[Image.Image]
    response_ids: list[int]
    logprobs: list[float] | None
    #: what verl's server said about the call (``global_steps``, ``min_global_steps``, ...)
    server_fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopState:
    """One sample's tokens as verl sees them, next to the episode driver."""

    driver: EpisodeDriver
    request_id: str
    settings: RolloutSection
    per_turn: bool = False
    rows: list[TurnRow] = field(default_factory=list)
    #: verl's server fields of the episode's calls, as its ToolAgentLoop keeps them: the first call's,
    #: with ``max_global_steps`` from the last (the v1 trainer's staleness tags read them)
    server_fields: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    images: list[Image.Image] = field(default_factory=list)
    prompt_length: int = 0
    turn_ends: list[int] = field(default_factory=list)
    chat: Chat = field(default_factory=list)
    generation: Generation | None = None
    metrics: dict[str, float] = field(default_factory=lambda: {"generate_sequences": 0.0, "tool_calls": 0.0})


def settings_from_row(extra: dict[str, Any]) -> RolloutSection:
    """The run's rollout section the dataset row carries (its one carrier, ``dataset.rollout_from_row``),
    refusing a window over one concatenated sequence."""
    settings = rollout_from_row(extra)
    if settings.window_size is not None and not settings.per_turn_sequences:
        raise ValueError(WINDOW_REFUSAL)
    return settings


def reply_params(sampling_params: dict[str, Any], settings: RolloutSection, budget: int) -> dict[str, Any]:
    """verl's sampling params for one reply: the run's per-reply cap (``rollout.sampling.max_tokens``,
    within ``budget``, the tokens the row still has room for) and stop strings."""
    params = dict(sampling_params)
    params["max_tokens"] = max(1, min(settings.sampling.max_tokens, budget))
    if settings.sampling.stop:
        params["stop"] = list(settings.sampling.stop)
    return params


@register(AGENT_NAME)
class VistaAgentLoop(AgentLoopBase):
    """Registered in verl as ``vista_agent`` (select it with the row column ``agent_name``)."""

    #: Tools made in this worker process, per ``rollout.tools`` entry: made once, so a tool holding
    #: weights (a detector) loads them once per worker, not once per episode.
    _tool_caches: ClassVar[dict[str, dict[str, Tool]]] = {}
    _tool_lock: ClassVar[threading.Lock] = threading.Lock()
    _pool: ClassVar[CallPool | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl's tool list; vista envs bring their own tools
        super().__init__(*args, **kwargs)
        vista_rl.load_plugins()  # discovery in this (worker) process, never a registry shipped to it
        self.response_length = int(self.rollout_config.response_length)
        self.end_ids = end_token_ids(self.tokenizer)
        self.last_trajectory: Trajectory | None = None

    @classmethod
    def pool(cls) -> CallPool:
        with cls._tool_lock:
            if cls._pool is None:
                cls._pool = CallPool(POOL_WORKERS, name="vista-verl")
            return cls._pool

    def _tools_factory(self, settings: RolloutSection) -> Any:
        key = json.dumps({tool_id: override.model_dump() for tool_id, override in settings.tools.items()},
                         sort_keys=True, default=str)
        with self._tool_lock:
            cache = self._tool_caches.setdefault(key, {})

        def tools_for(env: Env) -> dict[str, Tool]:
            return make_env_tools(env.tools, settings.tools, cache, self._tool_lock)

        return tools_for

    async def _run(self, calls: tuple[Call, ...]) -> list[CallOutcome]:
        """The driver's calls on the process's pool, awaited here (each with its own timeout)."""
        return await self.pool().run_calls_async(calls)

    # ------------------------------------------------------------------------ run
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        extra = dict(kwargs.get("extra_info") or {})
        raw_config = extra.get("env_config") or {}
        spec = EpisodeSpec(env_id=str(extra.get("env_id") or kwargs.get("env_id")), seed=extra.get("seed"),
                           env_config=dict(json.loads(raw_config) if isinstance(raw_config, str) else raw_config))
        settings = settings_from_row(extra)
        driver = EpisodeDriver(spec, settings, end_tokens=set(self.end_ids), stop_strings=bool(settings.sampling.stop))
        state = LoopState(driver, uuid.uuid4().hex, settings, per_turn=settings.per_turn_sequences)
        phase = Phase.PENDING
        try:
            while phase is not Phase.TERMINATED:
                if phase is Phase.PENDING:
                    phase = await self._pending(state, settings)
                elif phase is Phase.GENERATING:
                    phase = await self._generating(state, sampling_params)
                else:
                    phase = await self._processing(state)
        finally:
            self.last_trajectory = state.driver.finish()
            run_detached(state.driver.close_call())
            record_episode(self.last_trajectory, state.server_fields, str(extra.get("split", "")))
        if state.per_turn:
            return turn_outputs(state, self.last_trajectory, self.response_length)
        return self._output(state, self.last_trajectory)

    async def _pending(self, state: LoopState, settings: RolloutSection) -> Phase:
        """Start the env (timeout: ``env_timeout_s``) and build the first prompt's tokens."""
        driver = state.driver
        (opened,) = await self._run((driver.open_call(self._tools_factory(settings)),))
        driver.start(opened)
        if driver.done:  # nothing to train on: verl needs a prompt, so the sample fails loudly
            raise RuntimeError(driver.trajectory.failure or f"env {driver.spec.env_id} did not start")
        state.chat = driver.chat()
        state.messages = hf_messages(state.chat)
        state.images = [image for message in state.messages for image in _images_of(message)]
        self._assert_mm_supported(bool(state.images))
        state.token_ids = await self.ct_build_initial_tokens(state.messages, images=state.images or None)
        state.prompt_length = len(state.token_ids)
        return Phase.GENERATING

    async def _generating(self, state: LoopState, sampling_params: dict[str, Any]) -> Phase:
        """One reply from verl's server, merged as generated tokens (mask 1)."""
        started = time.perf_counter()
        prompt_ids = list(state.token_ids)
        budget = self.response_length - (0 if state.per_turn else len(state.response_mask))
        output = await self.server_manager.generate(
            request_id=state.request_id, prompt_ids=prompt_ids,
            sampling_params=reply_params(sampling_params, state.settings, budget),
            image_data=list(state.images) or None)
        state.metrics["generate_sequences"] += time.perf_counter() - started
        token_ids = list(output.token_ids)
        fields = dict(getattr(output, "extra_fields", None) or {})
        if not state.server_fields:
            state.server_fields.update(fields)
        elif fields.get("max_global_steps") is not None:
            state.server_fields["max_global_steps"] = fields["max_global_steps"]
        state.generation = Generation(
            text=reply_text(self.tokenizer, token_ids, self.end_ids), token_ids=token_ids,
            logprobs=list(output.log_probs) if output.log_probs else None, prompt_token_ids=prompt_ids,
            finish_reason=finish_reason(token_ids, output.stop_reason, self.end_ids))
        if state.per_turn:
            state.rows.append(TurnRow(prompt_ids, list(state.images), token_ids[:self.response_length],
                                      list(output.log_probs)[:self.response_length] if output.log_probs else None,
                                      fields))
            return Phase.PROCESSING
        if state.logprobs is None and output.log_probs and not state.response_mask:
            state.logprobs = []  # logprobs are on from the first turn (verl keeps them aligned)
        merged, mask, logprobs = await self.ct_merge_assistant_token(
            state.token_ids, output.token_ids, state.response_mask, state.logprobs,
            assistant_logprobs=output.log_probs or None)
        state.token_ids, state.response_mask = merged.token_ids, mask
        if logprobs is not None:
            state.logprobs = logprobs
        state.turn_ends.append(max(i for i, bit in enumerate(mask) if bit))
        return Phase.PROCESSING

    async def _processing(self, state: LoopState) -> Phase:
        """The reply's env step or tool calls (via the driver), then the next observation merged
        as context tokens (mask 0), unless the episode ended or the response is full."""
        driver, generation = state.driver, state.generation
        assert generation is not None
        started = time.perf_counter()
        calls = driver.respond(state.chat, generation)
        while calls:  # the reply's step or tool calls, then what they lead to (an observe, a reset)
            calls = driver.settle(await self._run(calls))
        if driver.tool_calls_asked:
            state.metrics["tool_calls"] += time.perf_counter() - started
        if driver.done:
            return Phase.TERMINATED
        if state.per_turn:  # the next turn's own context, windowed as the local engine windows it
            return await self._next_context(state)
        if len(state.response_mask) >= self.response_length:
            driver.end("response_length")
            return Phase.TERMINATED
        chat = driver.chat()  # the full history (a window is refused): the old chat, the reply, what it led to
        previous = [*state.messages, hf_message(chat[len(state.messages)])]
        updated = [*previous, *hf_messages(chat[len(previous):])]
        merged, mask, logprobs = await self.ct_merge_context_msg(
            previous, updated, state.token_ids, state.response_mask, state.logprobs)
        if len(mask) >= self.response_length:
            driver.end("response_length")  # the observation would overflow: stop before committing its images
            return Phase.TERMINATED
        state.token_ids, state.response_mask = merged.token_ids, mask
        if logprobs is not None:
            state.logprobs = logprobs
        state.images.extend(image for message in updated[len(previous):] for image in _images_of(message))
        state.messages, state.chat = updated, chat
        return Phase.GENERATING

    async def _next_context(self, state: LoopState) -> Phase:
        """Per-turn rows: the context of the next turn, built afresh (a window drops older turns)."""
        state.chat = state.driver.chat()
        state.messages = hf_messages(state.chat)
        state.images = [image for message in state.messages for image in _images_of(message)]
        state.token_ids = await self.ct_build_initial_tokens(state.messages, images=state.images or None)
        return Phase.GENERATING

    # --------------------------------------------------------------------- output
    def _output(self, state: LoopState, trajectory: Trajectory) -> AgentLoopOutput:
        limit, start = self.response_length, state.prompt_length
        turn_scores = [turn.reward for turn in trajectory.turns]
        mask = state.response_mask[:limit]
        return AgentLoopOutput(
            prompt_ids=state.token_ids[:start],
            response_ids=state.token_ids[start:][:limit],
            response_mask=[0] * len(mask) if trajectory.failure else mask,  # a failed episode trains nothing
            response_logprobs=state.logprobs[:limit] if state.logprobs is not None else None,
            multi_modal_data={"images": list(state.images)} if state.images else {},
            reward_score=float(sum(turn_scores)),
            num_turns=1 + 2 * len(trajectory.turns),
            metrics=state.metrics,
            extra_fields={
                **state.server_fields,
                "turn_scores": turn_scores,
                "turn_ends": [end for end in state.turn_ends if end < limit],
                **episode_fields(trajectory),
            },
        )


#: ``RUN_DIR/episodes.jsonl``, set by the engine in every Ray worker's environment (config.compose_overrides)
EPISODES_ENV = "VISTA_VERL_EPISODES"


def record_episode(trajectory: Trajectory, server_fields: dict[str, Any], split: str) -> None:
    """One JSON line per episode (step, reward, success, turns, failure) in the run's episode record, as
    the local engine's metrics have them per step; appended whole (O_APPEND), so the agent-loop
    workers' processes can share the file.  A failure to write is logged, never raised."""
    path = os.environ.get(EPISODES_ENV)
    if not path:
        return
    stats = EpisodeStats.from_metadata(trajectory.metadata)
    line = json.dumps({
        "split": split, "global_steps": server_fields.get("global_steps"), "env_id": trajectory.env_id,
        "seed": trajectory.seed, "reward": float(sum(turn.reward for turn in trajectory.turns)),
        "success": bool(trajectory.success), "turns": len(trajectory.turns), "failure": trajectory.failure,
        "stop_reason": stats.stop_reason or ""}) + "\n"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)
    except OSError as exc:
        logger.warning("vista agent loop: could not record the episode in %s: %s", path, exc)


def episode_fields(trajectory: Trajectory) -> dict[str, Any]:
    """What every row of an episode says about it (verl's batch columns, ``extra_fields``)."""
    stats = EpisodeStats.from_metadata(trajectory.metadata)
    return {
        "vista_env_id": trajectory.env_id,
        "vista_seed": trajectory.seed,
        "vista_success": bool(trajectory.success),
        "vista_tool_calls": stats.tool_calls,
        "vista_failure": trajectory.failure,
        "vista_stop_reason": stats.stop_reason or "",
        "vista_attempts": stats.attempts,
        "reward_extra_info": {},  # verl's v1 worker copies the final row's into the others (agent_loop_tq.py:175)
    }


def turn_state_key(row: TurnRow) -> str:
    """What the turn's reply was conditioned on (context ids and image content), as a digest: turns
    with the same key saw exactly the same context (``algorithm.turn_credit: state``)."""
    digest = hashlib.sha1(json.dumps(row.prompt_ids).encode())
    for image in row.images:
        digest.update(image.convert("RGB").tobytes())
    return digest.hexdigest()


def turn_outputs(state: LoopState, trajectory: Trajectory, response_length: int) -> list[AgentLoopOutput]:
    """Per-turn rows: one output per turn with that turn's reward and index (``vista_turn_*``); the
    last output carries the episode's total reward, which verl's worker copies to the others for its
    reward metrics (advantages come from ``vista_turn_reward``, see ``estimators``)."""
    views = trajectory.turn_views
    failure = trajectory.failure
    if not failure and len(views) != len(state.rows):
        failure = f"{len(views)} turn views for {len(state.rows)} turns"  # the local engine drops it too
    total = float(sum(turn.reward for turn in trajectory.turns))
    fields = {**episode_fields(trajectory), "vista_failure": failure, "vista_turns": len(state.rows)}
    outputs = []
    for index, row in enumerate(state.rows):
        reward = float(sum(views[index].turn_rewards)) if index < len(views) else 0.0
        outputs.append(AgentLoopOutput(
            prompt_ids=row.prompt_ids,
            response_ids=row.response_ids,
            response_mask=[0 if failure else 1] * len(row.response_ids),
            response_logprobs=row.logprobs,
            multi_modal_data={"images": list(row.images)} if row.images else {},
            reward_score=total if index == len(state.rows) - 1 else reward,
            num_turns=2,
            metrics=state.metrics,
            extra_fields={**row.server_fields, **fields, "vista_turn": index, "vista_turn_reward": reward,
                          "vista_state": turn_state_key(row),
                          "vista_action": hashlib.sha1(json.dumps(row.response_ids).encode()).hexdigest()},
        ))
    return outputs

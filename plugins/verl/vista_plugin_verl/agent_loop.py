"""``VistaAgentLoop``: any vista env, multi-turn with tools and images, as a verl agent loop.

verl instantiates the loop once per sample and calls ``run``; the dataset row (see ``dataset``)
names the env, its config and the seed in ``extra_info``.  Each turn the policy generates through
verl's token-in/token-out server (``server_manager.generate``), the reply is merged with verl's
Continuous Token builder (mask 1), then :func:`vista_rl.rollout.take_turn` decides what it leads to,
by the same rules as ``RolloutEngine`` (tool calls run guarded, or the env steps; engine-side
reflection resets the env for a new try); the resulting observation is merged as a user/tool message
(mask 0).  The rollout keys those rules read (``reflection``, ``reflection_attempts``,
``tool_response_role``) come with the dataset row (``extra_info["rollout"]``).
Images are kept in placeholder order (prompt images first, then each observation's), which is what
verl's trainer needs to rebuild ``multi_modal_inputs``.  Per-turn rewards, turn-end positions and
env metrics go into ``extra_fields`` (columns of the batch), their sum into ``reward_score``.

Env and tool calls run in a thread (``run_in_executor``) so a slow env never blocks the event loop
that serves other samples; an env that raises ends the episode with the error in ``vista_failure``
(never the batch).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

import vista_rl
from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_rl import Env, Observation, TokenView, Tool, Trajectory, Turn
from vista_rl.config import RolloutSection
from vista_rl.rollout import TurnOutcome, make_env_tools, take_turn

DEFAULT_MAX_TURNS = 5


@dataclass
class EpisodeState:
    """Everything the loop accumulates; ``trajectory()`` turns it into a vista Trajectory."""

    env_id: str
    seed: int | None
    system_prompt: str
    initial: Observation
    token_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    images: list[Any] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    tool_calls: int = 0
    attempt: int = 1
    success: bool = False
    failure: str | None = None

    def trajectory(self, prompt_length: int) -> Trajectory:
        view = TokenView(
            input_ids=list(self.token_ids),
            loss_mask=[0] * prompt_length + list(self.response_mask),
            turn_ends=[prompt_length + end for end in self.turn_ends],
            turn_rewards=[turn.reward for turn in self.turns],
            logprobs=[0.0] * prompt_length + list(self.logprobs) if self.logprobs is not None else None,
        )
        return Trajectory(env_id=self.env_id, seed=self.seed, system_prompt=self.system_prompt,
                          initial_observation=self.initial.text, initial_images=list(self.initial.images),
                          turns=list(self.turns), success=self.success, failure=self.failure, token_view=view,
                          metadata={"attempts": self.attempt})


def observation_message(observation: Observation, role: str = "user") -> dict[str, Any]:
    """A chat message in the HF content-part form verl's builders and processors read."""
    if not observation.images:
        return {"role": role, "content": observation.text}
    parts = observation.to_content_parts("hf")
    for part in parts:
        if part["type"] == "image":
            part["image"] = part["image"].convert("RGB")
    return {"role": role, "content": parts}


def _images_of(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [part["image"] for part in content if part.get("type") == "image"]


@register(AGENT_NAME)
class VistaAgentLoop(AgentLoopBase):
    """Registered in verl as ``vista_agent`` (select it with the row column ``agent_name``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl's tool list; vista envs bring their own tools
        super().__init__(*args, **kwargs)
        vista_rl.load_plugins()  # discovery in this (worker) process, never a registry shipped to it
        self.response_length = int(self.rollout_config.response_length)
        multi_turn = self.rollout_config.get("multi_turn", {}) or {}
        self.default_max_turns = int(multi_turn.get("max_assistant_turns") or DEFAULT_MAX_TURNS)
        self.last_state: EpisodeState | None = None

    # --------------------------------------------------------------------- helpers
    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    #: Tools made in this worker process, per id and ``rollout.tools`` entry: made once, so a tool
    #: holding weights (a detector) loads them once per worker, not once per episode.
    _tool_caches: ClassVar[dict[str, dict[str, Tool]]] = {}
    _tool_lock: ClassVar[threading.Lock] = threading.Lock()

    def _tools_for(self, env: Env, settings: RolloutSection) -> dict[str, Tool]:
        key = json.dumps({tool_id: override.model_dump() for tool_id, override in settings.tools.items()},
                         sort_keys=True, default=str)
        with self._tool_lock:
            cache = self._tool_caches.setdefault(key, {})
        return make_env_tools(env.tools, settings.tools, cache, self._tool_lock)

    # ------------------------------------------------------------------------ run
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        env_id = str(extra.get("env_id") or kwargs.get("env_id"))
        raw_config = extra.get("env_config") or {}
        env_config = dict(json.loads(raw_config) if isinstance(raw_config, str) else raw_config)
        seed = extra.get("seed")
        max_turns = int(extra.get("max_turns") or self.default_max_turns)
        raw_rollout = extra.get("rollout") or {}
        settings = RolloutSection(**(json.loads(raw_rollout) if isinstance(raw_rollout, str) else raw_rollout))
        request_id = uuid.uuid4().hex
        metrics: dict[str, float] = {"generate_sequences": 0.0, "tool_calls": 0.0}

        env: Env = await self._in_thread(lambda: vista_rl.make_env(env_id, **env_config))
        try:
            initial, _info = await self._in_thread(env.reset, seed)
            tools = await self._in_thread(self._tools_for, env, settings)
            state = EpisodeState(env_id, seed, env.system_prompt(), initial)
            messages: list[dict[str, Any]] = []
            if state.system_prompt:
                messages.append({"role": "system", "content": state.system_prompt})
            messages.append(observation_message(initial))
            state.images = _images_of(messages[-1])
            self._assert_mm_supported(bool(state.images))
            state.token_ids = await self.ct_build_initial_tokens(messages, images=state.images or None)
            prompt_length = len(state.token_ids)
            observation_text = initial.text

            turns_in_attempt = 0
            while turns_in_attempt < max_turns:
                turns_in_attempt += 1
                started = time.perf_counter()
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=state.token_ids, sampling_params=sampling_params,
                    image_data=state.images or None)
                metrics["generate_sequences"] += time.perf_counter() - started
                if state.logprobs is None and output.log_probs:
                    state.logprobs = []  # logprobs are on from the first turn (verl keeps them aligned)
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    state.token_ids, output.token_ids, state.response_mask, state.logprobs,
                    assistant_logprobs=output.log_probs or None)
                state.token_ids, state.response_mask = merged.token_ids, mask
                if logprobs is not None:
                    state.logprobs = logprobs
                state.turn_ends.append(max(i for i, bit in enumerate(mask) if bit))
                reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
                messages.append({"role": "assistant", "content": reply})

                started = time.perf_counter()
                outcome: TurnOutcome = await self._in_thread(functools.partial(
                    take_turn, reply, env, tools, list(state.images), settings, state.attempt, seed=seed,
                    metadata={"env_id": env_id, "seed": seed}))
                if outcome.tool_calls:
                    state.tool_calls += 1
                    metrics["tool_calls"] += time.perf_counter() - started
                state.turns.append(Turn(observation=observation_text, response=reply, reward=outcome.reward,
                                        info=dict(outcome.info), error=outcome.error,
                                        tool_calls=[execution.record() for execution in outcome.tool_calls]))
                if outcome.success is not None:
                    state.success = outcome.success
                if outcome.failure is not None:
                    state.failure = outcome.failure
                if outcome.observation is None or len(state.response_mask) >= self.response_length:
                    break
                observation = Observation(outcome.observation.content, list(outcome.observation.images))
                previous = list(messages)
                messages.append(observation_message(observation, outcome.observation.role))
                merged, mask, logprobs = await self.ct_merge_context_msg(
                    previous, messages, state.token_ids, state.response_mask,
                    state.logprobs if state.logprobs is not None else None)
                if len(mask) >= self.response_length:
                    break  # the observation would overflow: stop before committing its images
                state.token_ids, state.response_mask = merged.token_ids, mask
                if logprobs is not None:
                    state.logprobs = logprobs
                state.images.extend(_images_of(messages[-1]))
                observation_text = observation.text
                if outcome.retry:  # reflection: the env was reset; a new try with its own turn budget
                    state.attempt += 1
                    turns_in_attempt = 0
        except Exception as exc:  # noqa: BLE001 - an env failure ends this episode, not the batch
            if "state" not in locals() or not state.token_ids:
                raise
            state.failure = f"{type(exc).__name__}: {exc}"
        finally:
            await self._in_thread(env.close)

        self.last_state = state
        return self._output(state, prompt_length, metrics)

    def _output(self, state: EpisodeState, prompt_length: int, metrics: dict[str, float]) -> AgentLoopOutput:
        limit = self.response_length
        response_ids = state.token_ids[prompt_length:]
        turn_scores = [turn.reward for turn in state.turns]
        turn_ends = [end for end in state.turn_ends if end < limit]
        return AgentLoopOutput(
            prompt_ids=state.token_ids[:prompt_length],
            response_ids=response_ids[:limit],
            response_mask=state.response_mask[:limit],
            response_logprobs=state.logprobs[:limit] if state.logprobs is not None else None,
            multi_modal_data={"images": list(state.images)} if state.images else {},
            reward_score=float(sum(turn_scores)),
            num_turns=1 + 2 * len(state.turns),
            metrics=metrics,
            extra_fields={
                "turn_scores": turn_scores,
                "turn_ends": turn_ends,
                "vista_env_id": state.env_id,
                "vista_seed": state.seed,
                "vista_success": state.success,
                "vista_tool_calls": state.tool_calls,
                "vista_failure": state.failure,
                "vista_attempts": state.attempt,
            },
        )

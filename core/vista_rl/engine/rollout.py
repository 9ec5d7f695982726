"""The engine's multi-turn rollout: B envs x G samples, the policy in memory, token view built as it
goes.

It drives the model directly (not through a ``ModelBackend``) because training needs the sampled ids
themselves and the exact image tensors; the trajectories it returns are the core's ``Trajectory``
with a ``TokenView``, so the store, judges and reports read them like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vista_rl.engine.chat_tokens import ChatEncoder, EpisodeTokens
from vista_rl.env import Env
from vista_rl.observation import Observation
from vista_rl.trajectory import TokenView, Trajectory, Turn

#: A policy step: token prefixes of live episodes in, sampled continuation ids out.
Sampler = Callable[[Sequence[EpisodeTokens]], list[list[int]]]


@dataclass
class Episode:
    """A finished episode: the trajectory for people and logs, the tokens for training."""

    trajectory: Trajectory
    tokens: EpisodeTokens
    group: int
    turn_rewards: list[float] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.trajectory.success

    @property
    def total_reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def response_tokens(self) -> int:
        return int(sum(self.tokens.loss_mask))


@dataclass
class RolloutStats:
    seconds: float = 0.0
    generated_tokens: int = 0
    env_errors: int = 0


@dataclass
class _Live:
    env: Env
    episode: Episode
    observation: Observation
    done: bool = False


def run_rollout(
    env_factory: Callable[[], Env],
    env_id: str,
    seeds: Sequence[int],
    group_size: int,
    encoder: ChatEncoder,
    sampler: Sampler | None,
    max_turns: int,
    *,
    batch_size: int = 64,
    stats: RolloutStats | None = None,
) -> list[Episode]:
    """Play ``group_size`` episodes per seed.  ``sampler=None`` plays the env's oracle (SFT data).

    A crashing env ends only its own episode (recorded as ``failure``); the rest go on.
    """
    start = time.perf_counter()
    stats = stats if stats is not None else RolloutStats()
    live: list[_Live] = []
    for group, seed in enumerate(seeds):
        for sample in range(group_size):
            env = env_factory()
            observation, _info = env.reset(seed=seed)
            system = env.system_prompt()
            ids, images = encoder.prompt_segment(system, observation.text, observation.images)
            tokens = EpisodeTokens()
            tokens.extend(ids, trainable=False)
            tokens.images.extend(images)
            trajectory = Trajectory(env_id=env_id, seed=seed, sample_index=sample, system_prompt=system,
                                    initial_observation=observation.text,
                                    initial_images=list(observation.images))
            live.append(_Live(env, Episode(trajectory, tokens, group), observation))
    for turn_index in range(max_turns):
        active = [item for item in live if not item.done]
        if not active:
            break
        responses = _respond(active, encoder, sampler, batch_size)
        for item, ids in zip(active, responses, strict=True):
            stats.generated_tokens += len(ids)
            _apply(item, ids, encoder, last_turn=turn_index == max_turns - 1, stats=stats)
    for item in live:
        item.env.close()
        _finish_token_view(item.episode)
    stats.seconds += time.perf_counter() - start
    return [item.episode for item in live]


def _respond(active: list[_Live], encoder: ChatEncoder, sampler: Sampler | None, batch_size: int) -> list[list[int]]:
    if sampler is None:
        out = []
        for item in active:
            text = item.env.oracle_response()
            out.append(encoder.response_ids(text or ""))
        return out
    result: list[list[int]] = []
    for start in range(0, len(active), batch_size):
        chunk = active[start:start + batch_size]
        result.extend(sampler([item.episode.tokens for item in chunk]))
    return result


def _apply(item: _Live, ids: list[int], encoder: ChatEncoder, last_turn: bool, stats: RolloutStats) -> None:
    episode, tokens = item.episode, item.episode.tokens
    if not ids or ids[-1] != encoder.im_end_id:
        # Cut at the token limit: close the turn with <|im_end|> the model did not choose (not trained).
        tokens.extend(ids, trainable=True)
        tokens.extend([encoder.im_end_id], trainable=False)
    else:
        tokens.extend(ids, trainable=True)
    tokens.turn_ends.append(len(tokens) - 1)
    text = encoder.decode(ids)
    turn = Turn(observation=item.observation.text, response=text, images=list(item.observation.images))
    try:
        result = item.env.step(text)
    except Exception as exc:  # noqa: BLE001 - a crashing env ends its own episode, not the batch
        stats.env_errors += 1
        turn.error = f"{type(exc).__name__}: {exc}"
        episode.trajectory.failure = f"env raised in step: {turn.error}"
        episode.trajectory.turns.append(turn)
        episode.turn_rewards.append(0.0)
        item.done = True
        return
    turn.reward = result.reward
    turn.info = _jsonable_info(result.info)
    episode.trajectory.turns.append(turn)
    episode.turn_rewards.append(result.reward)
    if result.info.get("success"):
        episode.trajectory.success = True
    if result.done or last_turn:
        item.done = True
        return
    item.observation = result.observation
    next_ids, images = encoder.followup_segment(result.observation.text, result.observation.images)
    tokens.extend(next_ids, trainable=False)
    tokens.images.extend(images)


def _jsonable_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if isinstance(v, str | int | float | bool | type(None) | list | dict)}


def _finish_token_view(episode: Episode) -> None:
    tokens = episode.tokens
    episode.trajectory.token_view = TokenView(
        input_ids=list(tokens.input_ids), loss_mask=list(tokens.loss_mask),
        turn_ends=list(tokens.turn_ends), turn_rewards=list(episode.turn_rewards),
    )

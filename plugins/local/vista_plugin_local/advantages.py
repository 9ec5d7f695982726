"""From episodes to an ``AdvantageBatch`` and back: per-turn rewards go on each turn's last token,
the loss mask is the assistant-token mask, samples of one seed share a group id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import vista_rl
from vista_plugin_local.samples import TrainSample
from vista_rl import AdvantageBatch, AdvantageOutput, ConfigError, UnknownItemError


def build_advantage_batch(episodes: Sequence[TrainSample], width: int, values: torch.Tensor | None) -> AdvantageBatch:
    n = len(episodes)
    rewards = torch.zeros((n, width))
    mask = torch.zeros((n, width))
    turn_ends = torch.zeros((n, width))
    for row, episode in enumerate(episodes):
        tokens = episode.tokens
        mask[row, :len(tokens)] = torch.tensor(tokens.loss_mask, dtype=torch.float32)
        for end, reward in zip(tokens.turn_ends, episode.turn_rewards, strict=False):
            # The turn's reward sits on its last *trained* token (a forced <|im_end|> is not trained).
            position = end
            while position > 0 and tokens.loss_mask[position] == 0:
                position -= 1
            rewards[row, position] += reward
            turn_ends[row, position] = 1.0
    group_ids = torch.tensor([episode.group for episode in episodes], dtype=torch.long)
    return AdvantageBatch(token_rewards=rewards, response_mask=mask, advantage_mask=mask.clone(),
                          group_ids=group_ids, values=values, turn_ends=turn_ends)


def per_turn_advantages(estimator: Any, samples: Sequence[TrainSample], width: int) -> torch.Tensor:
    """Advantages of per-turn samples (``rollout.sequences: turn``), ``[len(samples), width]``.

    The estimator sees each episode as one row with one position per turn (that turn's reward there,
    every position a turn end), so GRPO normalises whole-episode returns within the seed's group and
    turn-level estimators see the turns; each turn's advantage then goes on every trained token of
    that turn's own sequence, divided by the episode's number of turns.  That division makes every
    episode weigh the same in the loss whatever its length, as one sequence per episode would: GRPO's
    advantages sum to zero within a group, so the push on tokens every reply shares (``<answer>``,
    ``</answer>``, ``<|im_end|>``) cancels.  Without it, long failed episodes outweigh short successes,
    the batch pushes those tokens down every step, and Adam turns that small but steady gradient into
    full-size steps (one of two causes of the reply format breaking in RL on FrozenLake at lr 5e-4;
    the other is the learning rate itself, docs/main-job.md).  Estimators that need a value per token
    cannot run here (``validate`` refuses them)."""
    rows: dict[int, int] = {}
    for sample in samples:
        rows.setdefault(id(sample.trajectory), len(rows))
    turns = 1 + max(sample.turn_index or 0 for sample in samples)
    rewards = torch.zeros((len(rows), turns))
    mask = torch.zeros((len(rows), turns))
    group_ids = torch.zeros(len(rows), dtype=torch.long)
    for sample in samples:
        row, turn = rows[id(sample.trajectory)], sample.turn_index or 0
        rewards[row, turn] = float(sum(sample.turn_rewards))
        mask[row, turn] = 1.0
        group_ids[row] = sample.group
    batch = AdvantageBatch(token_rewards=rewards, response_mask=mask, advantage_mask=mask.clone(),
                           group_ids=group_ids, values=None, turn_ends=mask.clone())
    per_turn = compute_advantages(estimator, batch).advantages / mask.sum(dim=1, keepdim=True).clamp(min=1)
    out = torch.zeros((len(samples), width))
    for index, sample in enumerate(samples):
        loss_mask = torch.tensor(sample.tokens.loss_mask[:width], dtype=torch.float32)
        out[index, :len(loss_mask)] = per_turn[rows[id(sample.trajectory)], sample.turn_index or 0] * loss_mask
    return out


def make_estimator(estimator_id: str, params: dict[str, Any]) -> Any:
    try:
        return vista_rl.make_estimator(estimator_id, **params)
    except UnknownItemError as exc:
        raise ConfigError(f"algorithm.estimator: {exc}") from None
    except TypeError as exc:
        raise ConfigError(f"algorithm.estimator_params: {exc}") from None


def compute_advantages(estimator: Any, batch: AdvantageBatch) -> AdvantageOutput:
    out = estimator(batch)
    if not isinstance(out, AdvantageOutput):
        advantages, returns = out  # tolerate estimators returning a plain pair
        out = AdvantageOutput(advantages=advantages, returns=returns)
    return out

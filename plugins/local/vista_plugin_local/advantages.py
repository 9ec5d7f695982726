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

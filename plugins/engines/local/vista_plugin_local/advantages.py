"""From episodes to an ``AdvantageBatch`` and back: per-turn rewards go on each turn's last token,
the loss mask is the assistant-token mask, samples of one seed share a group id."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

import vista_rl
from vista_plugin_local.samples import TrainSample
from vista_rl import AdvantageBatch, AdvantageOutput, ConfigError, UnknownItemError
from vista_rl.algorithms.turn_credit import TurnCredit, turn_advantages, turn_token_advantages

__all__ = ["TurnCredit", "build_advantage_batch", "compute_advantages", "loss_masks", "make_estimator",
           "per_turn_advantages", "per_turn_targets", "turn_state"]


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


def per_turn_advantages(estimator: Any, samples: Sequence[TrainSample], width: int,
                        credit: TurnCredit = "episode", values: torch.Tensor | None = None) -> torch.Tensor:
    """Advantages of per-turn samples (``rollout.sequences: turn``), ``[len(samples), width]``
    (:func:`per_turn_targets` without the returns)."""
    return per_turn_targets(estimator, samples, width, credit, values)[0]


def per_turn_targets(estimator: Any, samples: Sequence[TrainSample], width: int, credit: TurnCredit = "episode",
                     values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns of per-turn samples, each ``[len(samples), width]``.

    The rules are the core's, shared with the verl engine so both give the same advantages
    (:mod:`vista_rl.algorithms.turn_credit`): without a critic, one advantage per sample by
    ``credit`` (``algorithm.turn_credit``; ``state`` compares turns by :func:`turn_state`), put on
    every trained token of the sample, and no returns (zeros: nothing learns a value); with
    ``values`` (the critic's, ``[len(samples), width]``), the estimator's own token-level credit over
    each episode's replies (``turn_token_advantages``) and the returns the value head learns."""
    episodes = [id(sample.trajectory) for sample in samples]
    turns = [sample.turn_index or 0 for sample in samples]
    rewards = [float(sum(sample.turn_rewards)) for sample in samples]
    groups = [sample.group for sample in samples]

    def estimate(batch: AdvantageBatch) -> AdvantageOutput:
        return compute_advantages(estimator, batch)

    if values is not None:
        return turn_token_advantages(estimate, episodes, turns, rewards, groups, loss_masks(samples, width),
                                     values[:, :width])
    states = actions = None
    if credit == "state":
        states = [turn_state(sample) for sample in samples]
        actions = [tuple(sample.tokens.input_ids[len(state[0]):]) for sample, state in zip(samples, states, strict=True)]
    per_sample = turn_advantages(estimate, episodes, turns, rewards, groups, credit, states, actions)
    advantages = per_sample.unsqueeze(1) * loss_masks(samples, width)
    return advantages, torch.zeros_like(advantages)


def loss_masks(samples: Sequence[TrainSample], width: int) -> torch.Tensor:
    """Each sample's trained tokens, ``[len(samples), width]``."""
    out = torch.zeros((len(samples), width))
    for index, sample in enumerate(samples):
        loss_mask = sample.tokens.loss_mask[:width]
        out[index, :len(loss_mask)] = torch.tensor(loss_mask, dtype=torch.float32)
    return out


def _image_key(image: Any) -> str:
    digest = getattr(image, "digest", None)
    if digest:
        return str(digest)
    return hashlib.sha1(image.pixel_values.detach().cpu().numpy().tobytes()).hexdigest()


def turn_state(sample: TrainSample) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """What the turn's reply was conditioned on: the ids before its first trained token and the
    content of its images.  Two turns with the same state saw exactly the same context."""
    tokens = sample.tokens
    first = next((i for i, trained in enumerate(tokens.loss_mask) if trained), len(tokens))
    return tuple(tokens.input_ids[:first]), tuple(_image_key(image) for image in tokens.images)


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

"""From episodes to an ``AdvantageBatch`` and back: per-turn rewards go on each turn's last token,
the loss mask is the assistant-token mask, samples of one seed share a group id."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

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


#: How an episode's outcome reaches its turns (``algorithm.turn_credit``).
TurnCredit = Literal["episode", "turn", "state"]


def per_turn_advantages(estimator: Any, samples: Sequence[TrainSample], width: int,
                        credit: TurnCredit = "episode") -> torch.Tensor:
    """Advantages of per-turn samples (``rollout.sequences: turn``), ``[len(samples), width]``.

    ``credit`` (``algorithm.turn_credit``): ``episode`` as below; ``turn`` the same without the
    division by the episode's turns; ``state`` turn-level credit from the batch's own turns
    (:func:`state_credit`).

    The estimator sees each episode as one row with one position per turn, so GRPO normalises
    whole-episode returns within the seed's group; each turn's advantage then goes on every trained
    token of that turn's own sequence.  Why ``episode`` divides by the turns: every episode weighs the
    same in the loss whatever its length (the measurements: docs/turn-credit.md).  Estimators that
    need a value per token cannot run here (the preflight refuses them)."""
    if credit == "state":
        return _broadcast(state_credit(estimator, samples), samples, width)
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
    per_turn = compute_advantages(estimator, batch).advantages
    if credit == "episode":
        per_turn = per_turn / mask.sum(dim=1, keepdim=True).clamp(min=1)
    values = torch.stack([per_turn[rows[id(sample.trajectory)], sample.turn_index or 0] for sample in samples])
    return _broadcast(values, samples, width)


def _broadcast(values: torch.Tensor, samples: Sequence[TrainSample], width: int) -> torch.Tensor:
    """One advantage per sample onto every trained token of its sequence, ``[len(samples), width]``."""
    out = torch.zeros((len(samples), width))
    for index, sample in enumerate(samples):
        loss_mask = torch.tensor(sample.tokens.loss_mask[:width], dtype=torch.float32)
        out[index, :len(loss_mask)] = values[index] * loss_mask
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


def state_credit(estimator: Any, samples: Sequence[TrainSample]) -> torch.Tensor:
    """Turn-level credit without a critic, one advantage per per-turn sample.

    Why: GRPO gives every turn the episode's advantage, so a turn every sample took alike is noise on
    the tokens that hold most of the loss mass (the measurements and what was tried: docs/turn-credit.md).
    Each turn's return-to-go is normalised by the estimator among the batch's turns with the same
    state (:func:`turn_state`), and turns with the same state and reply share the mean of their
    advantages; a state seen once gets 0."""
    episodes: dict[int, list[int]] = {}
    for index, sample in enumerate(samples):
        episodes.setdefault(id(sample.trajectory), []).append(index)
    to_go = torch.zeros(len(samples), dtype=torch.float64)
    for indices in episodes.values():
        ordered = sorted(indices, key=lambda i: samples[i].turn_index or 0)
        running = 0.0
        for index in reversed(ordered):
            running += float(sum(samples[index].turn_rewards))
            to_go[index] = running
    states: dict[Any, int] = {}
    actions: dict[Any, list[int]] = {}
    state_of = []
    for index, sample in enumerate(samples):
        state = turn_state(sample)
        group = states.setdefault(state, len(states))
        state_of.append(group)
        actions.setdefault((group, tuple(sample.tokens.input_ids[len(state[0]):])), []).append(index)
    group_ids = torch.tensor(state_of, dtype=torch.long)
    ones = torch.ones((len(samples), 1))
    batch = AdvantageBatch(token_rewards=to_go.float().unsqueeze(1), response_mask=ones,
                           advantage_mask=ones.clone(), group_ids=group_ids, values=None, turn_ends=ones.clone())
    each = compute_advantages(estimator, batch).advantages[:, 0]
    advantages = torch.zeros_like(each)
    for indices in actions.values():
        advantages[indices] = each[indices].mean()
    sizes = torch.bincount(group_ids, minlength=len(states))
    return torch.where(sizes[group_ids] > 1, advantages, torch.zeros_like(advantages))


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

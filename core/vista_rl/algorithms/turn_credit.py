"""Advantages of per-turn training rows (``rollout.sequences: turn``), one number per row.

With per-turn sequences each turn of an episode is its own training row, so an estimator written for
rows (GRPO, RLOO, ...) would see a long episode as many samples and let it outweigh a short one.
Instead each episode becomes one row of a ``[episodes, turns]`` batch with its turns' rewards, the
estimator runs on that, and the result goes back to the turns as ``algorithm.turn_credit`` says:

- ``episode``: the turn's advantage divided by the episode's number of turns (every episode weighs the
  same in the loss whatever its length, as one sequence per episode would);
- ``turn``: the same, undivided;
- ``state``: each turn's return-to-go, normalised among the batch's turns that saw the same context
  (``states``), averaged over the turns with the same context and reply (``actions``); a context
  seen once gets 0.

With a critic (GAE and its kin) the credit is the estimator's own, token by token over each episode's
replies (:func:`turn_token_advantages`).

Both engines call these rules on plain per-row lists (why each choice: docs/turn-credit.md): the local
engine on its per-turn samples (``vista_plugin_local.advantages.per_turn_advantages``), the verl engine
on its ``{uid}_{session}_{turn}`` rows, and ``tests/verl/test_verl_turn_advantages.py`` checks both give
the same advantages on the same batch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Literal

import torch

from vista_rl.estimator import AdvantageBatch, AdvantageOutput

TurnCredit = Literal["episode", "turn", "state"]
Estimate = Callable[[AdvantageBatch], AdvantageOutput | tuple[torch.Tensor, torch.Tensor]]


def _advantages(estimate: Estimate, batch: AdvantageBatch) -> torch.Tensor:
    out = estimate(batch)
    return out.advantages if isinstance(out, AdvantageOutput) else out[0]


def _codes(keys: Sequence[Hashable]) -> list[int]:
    """Dense ids in order of first appearance."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(key, len(seen)) for key in keys]


def turn_advantages(estimate: Estimate, episodes: Sequence[Hashable], turns: Sequence[int],
                    rewards: Sequence[float], groups: Sequence[Hashable], credit: TurnCredit = "episode",
                    states: Sequence[Hashable] | None = None,
                    actions: Sequence[Hashable] | None = None) -> torch.Tensor:
    """One advantage per row (``[rows]``, float32).  Row ``i`` is turn ``turns[i]`` (0-based) of episode
    ``episodes[i]`` with reward ``rewards[i]``; episodes of one seed share ``groups[i]``.  ``credit:
    state`` needs ``states`` (what the turn's reply was conditioned on) and ``actions`` (the reply)."""
    count = len(episodes)
    if not (len(turns) == len(rewards) == len(groups) == count):
        raise ValueError("episodes, turns, rewards and groups must have one entry per row")
    if count == 0:
        return torch.zeros(0)
    if credit == "state":
        if states is None or actions is None:
            raise ValueError("turn_credit 'state' needs each row's state and action")
        return _state_credit(estimate, episodes, turns, rewards, states, actions)
    rows = _codes(episodes)
    width = 1 + max(int(turn) for turn in turns)
    reward = torch.zeros((max(rows) + 1, width))
    mask = torch.zeros_like(reward)
    group_ids = torch.zeros(reward.shape[0], dtype=torch.long)
    group_codes = _codes(groups)
    for index in range(count):
        row, turn = rows[index], int(turns[index])
        reward[row, turn] = float(rewards[index])
        mask[row, turn] = 1.0
        group_ids[row] = group_codes[index]
    batch = AdvantageBatch(token_rewards=reward, response_mask=mask, advantage_mask=mask.clone(),
                           group_ids=group_ids, values=None, turn_ends=mask.clone())
    per_turn = _advantages(estimate, batch)
    if credit == "episode":
        per_turn = per_turn / mask.sum(dim=1, keepdim=True).clamp(min=1)
    return torch.stack([per_turn[rows[index], int(turns[index])] for index in range(count)]).float()


def _state_credit(estimate: Estimate, episodes: Sequence[Hashable], turns: Sequence[int],
                  rewards: Sequence[float], states: Sequence[Hashable], actions: Sequence[Hashable]) -> torch.Tensor:
    count = len(episodes)
    by_episode: dict[Hashable, list[int]] = {}
    for index, episode in enumerate(episodes):
        by_episode.setdefault(episode, []).append(index)
    to_go = torch.zeros(count, dtype=torch.float64)
    for indices in by_episode.values():
        running = 0.0
        for index in sorted(indices, key=lambda i: int(turns[i]), reverse=True):
            running += float(rewards[index])
            to_go[index] = running
    state_of = _codes(states)
    groups: dict[tuple[int, Hashable], list[int]] = {}
    for index in range(count):
        groups.setdefault((state_of[index], actions[index]), []).append(index)
    group_ids = torch.tensor(state_of, dtype=torch.long)
    ones = torch.ones((count, 1))
    batch = AdvantageBatch(token_rewards=to_go.float().unsqueeze(1), response_mask=ones, advantage_mask=ones.clone(),
                           group_ids=group_ids, values=None, turn_ends=ones.clone())
    each = _advantages(estimate, batch)[:, 0]
    out = torch.zeros_like(each)
    for indices in groups.values():
        out[indices] = each[indices].mean()
    sizes = torch.bincount(group_ids, minlength=max(state_of) + 1)
    return torch.where(sizes[group_ids] > 1, out, torch.zeros_like(out)).float()


def turn_token_advantages(estimate: Estimate, episodes: Sequence[Hashable], turns: Sequence[int],
                          rewards: Sequence[float], groups: Sequence[Hashable], mask: torch.Tensor,
                          values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns of per-turn rows for an estimator with a critic (GAE and its kin), each
    ``[rows, width]`` like ``mask`` (the rows' trained tokens) and ``values`` (the critic's value of
    each token).

    A critic gives a value per token, so the credit is the estimator's own, token by token: each
    episode becomes one row of the estimator's batch holding its turns' trained tokens in turn order,
    with each turn's reward on its last trained token and each token's value from its own row.  That
    is the episode's sequence with the observations left out, so per-turn rows get what one sequence
    per episode gets from a GAE that steps over observations (``masked_gae``), and every token weighs
    in the loss as it would there (``algorithm.turn_credit`` has nothing to divide).  A turn without
    a trained token passes its reward on to the episode's next trained turn (or its last one)."""
    count = len(episodes)
    if not (len(turns) == len(rewards) == len(groups) == count):
        raise ValueError("episodes, turns, rewards and groups must have one entry per row")
    if mask.dim() != 2 or mask.shape[0] != count or tuple(values.shape) != tuple(mask.shape):
        raise ValueError(f"mask and values must both be [rows={count}, tokens]; got {tuple(mask.shape)} and "
                         f"{tuple(values.shape)}")
    advantages, returns = torch.zeros(mask.shape), torch.zeros(mask.shape)
    if count == 0:
        return advantages, returns
    trained = [torch.nonzero(mask[index] > 0).flatten() for index in range(count)]
    by_episode: dict[Hashable, list[int]] = {}
    for index, episode in enumerate(episodes):
        by_episode.setdefault(episode, []).append(index)
    ordered = [sorted(indices, key=lambda i: int(turns[i])) for indices in by_episode.values()]
    width = max(1, max(sum(len(trained[i]) for i in indices) for indices in ordered))
    shape = (len(ordered), width)
    token_rewards, token_mask, token_values = torch.zeros(shape), torch.zeros(shape), torch.zeros(shape)
    turn_ends = torch.zeros(shape)
    group_codes = _codes(groups)
    group_ids = torch.tensor([group_codes[indices[0]] for indices in ordered], dtype=torch.long)
    spans: list[tuple[int, int, int, int]] = []  # (row, episode, start, length)
    for episode, indices in enumerate(ordered):
        cursor, pending = 0, 0.0
        for index in indices:
            length = len(trained[index])
            if length == 0:
                pending += float(rewards[index])
                continue
            token_mask[episode, cursor:cursor + length] = 1.0
            token_values[episode, cursor:cursor + length] = values[index, trained[index]].float()
            token_rewards[episode, cursor + length - 1] += float(rewards[index]) + pending
            turn_ends[episode, cursor + length - 1] = 1.0
            spans.append((index, episode, cursor, length))
            cursor, pending = cursor + length, 0.0
        if pending and cursor:
            token_rewards[episode, cursor - 1] += pending
    out = estimate(AdvantageBatch(token_rewards=token_rewards, response_mask=token_mask,
                                  advantage_mask=token_mask.clone(), group_ids=group_ids, values=token_values,
                                  turn_ends=turn_ends))
    episode_advantages, episode_returns = (out.advantages, out.returns) if isinstance(out, AdvantageOutput) else out
    for index, episode, start, length in spans:
        advantages[index, trained[index]] = episode_advantages[episode, start:start + length].float()
        returns[index, trained[index]] = episode_returns[episode, start:start + length].float()
    return advantages, returns

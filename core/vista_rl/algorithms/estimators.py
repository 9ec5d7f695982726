"""Advantage estimators: ``estimator(batch: AdvantageBatch, **params) -> AdvantageOutput``.

Registered by ``vista_rl.builtin.estimators`` under the ids below; ``vista_rl.make_estimator(id,
**params)`` binds the params.  All tensors are ``[batch, tokens]``; outputs have the dtype of
``batch.token_rewards`` and advantages are zero outside the advantage mask.

Masks, as in VAGEN, are two separate switches:

- ``response_mask`` (the loss mask, M^loss): tokens the policy generated.  Advantages are whitened
  with statistics over it.
- ``advantage_mask`` (M^adv, VAGEN's "GAE mask"; defaults to ``response_mask``): the tokens the
  GAE recursions step through (observation tokens outside it are skipped: the next value is the
  next assistant token's) and the only tokens with non-zero advantages.

Outcome estimators (one scalar per sample, broadcast over tokens; need ``group_ids`` where a
baseline is per group):

- ``grpo`` (``norm_by_std=True``, ``epsilon=1e-6``): ``(R - mean_g) / (std_g + eps)``.
- ``dr_grpo`` (Dr. GRPO, arXiv 2503.20783): ``R - mean_g``, no std scaling.
- ``rloo``: ``R - mean of the other samples of the group``.
- ``reinforce_plus_plus`` (``gamma=1.0``, ``whiten=True``): discounted reward-to-go over the
  advantage-mask tokens, whitened (no critic, no groups).
- ``reinforce_plus_plus_baseline`` (``whiten=True``): ``R - mean_g``, whitened over the loss mask.

``R`` is the sum of a row's token rewards.  Singleton groups follow verl: mean 0, std 1.  As in
verl, their ``returns`` are the advantages (the very same tensor, to save a copy).

Critic-based estimators (need ``values``):

- ``gae`` (``gamma=1.0``, ``lam=1.0``, ``whiten=True``): classic GAE over *every* position up to
  the row's last assistant token: observation tokens are ordinary TD steps with their own values.
- ``masked_gae`` (same params): GAE over the advantage-mask tokens only (VAGEN ``masked_gae``;
  identical to verl >= 0.5 ``gae``).  Rewards on skipped tokens are ignored, as in both.
- ``bilevel_gae`` (``gamma=1.0``, ``lam=1.0``, ``turn_gamma=0.95``, ``turn_lam=1.0``,
  ``whiten=True``): VAGEN's bi-level GAE.  Across turns, with ``r_k`` the turn's reward and
  ``V_k`` the value at its last token: ``delta_k = r_k + turn_gamma V_{k+1} - V_k``,
  ``A_k = delta_k + turn_gamma turn_lam A_{k+1}``.  Within turn ``k`` the last token gets ``A_k``
  and earlier assistant tokens ``p`` (next assistant token ``p'``) get
  ``A_p = gamma V(p') - V(p) + gamma lam A_{p'}``.  Returns: ``A + V`` on those tokens (so
  ``A_k + V_k`` at each turn end).
- ``turnwise_gae`` (``turn_gamma=0.95``, ``turn_lam=1.0``, ``whiten=True``): the same turn-level
  recursion; every token of turn ``k`` gets ``A_k`` and the return ``A_k + V_k``.

Turns come from ``turn_ends`` (or, if absent, each run of advantage-mask tokens is one turn).  A
turn's reward is the sum of token rewards from after the previous turn end up to its own end
(VAGEN puts it on the end token); rewards after the last turn end count towards the last turn.
"""

from __future__ import annotations

import torch

from vista_rl.algorithms.groups import group_index, group_stats
from vista_rl.algorithms.masked import WHITEN_EPS, masked_whiten
from vista_rl.algorithms.scan import next_step_values, positions, reverse_linear_scan
from vista_rl.algorithms.turns import turn_layout, turn_level_gae
from vista_rl.estimator import AdvantageBatch, AdvantageOutput

__all__ = [
    "bilevel_gae",
    "dr_grpo",
    "gae",
    "grpo",
    "masked_gae",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "rloo",
    "turnwise_gae",
]


# ----------------------------------------------------------------------------------- helpers
def _check_unit(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def _check_batch(batch: AdvantageBatch, estimator: str) -> None:
    shape = tuple(batch.token_rewards.shape)
    if len(shape) != 2:
        raise ValueError(f"{estimator}: token_rewards must be [batch, tokens], got shape {shape}")
    for name in ("response_mask", "advantage_mask", "values", "turn_ends"):
        tensor = getattr(batch, name)
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(f"{estimator}: {name} has shape {tuple(tensor.shape)}, expected {shape}")


def _advantage_mask(batch: AdvantageBatch) -> torch.Tensor:
    mask = batch.advantage_mask if batch.advantage_mask is not None else batch.response_mask
    return mask.bool()


def _values(batch: AdvantageBatch, estimator: str) -> torch.Tensor:
    if batch.values is None:
        raise ValueError(
            f"{estimator} needs batch.values (critic values); without a critic use grpo, rloo or "
            "reinforce_plus_plus"
        )
    return batch.values.to(torch.float64)


def _group_index(batch: AdvantageBatch, estimator: str) -> torch.Tensor:
    if batch.group_ids is None:
        raise ValueError(f"{estimator} needs batch.group_ids (samples of one prompt/seed share an id)")
    rows = batch.token_rewards.shape[0]
    return group_index(batch.group_ids, rows, device=batch.token_rewards.device)


def _finish(
    batch: AdvantageBatch, advantages: torch.Tensor, returns: torch.Tensor, whiten: bool,
    mask: torch.Tensor | None = None,
) -> AdvantageOutput:
    """Whiten over the loss mask (optionally), zero outside the advantage mask (``mask``, when the
    caller has it already), cast back."""
    if whiten:
        advantages = masked_whiten(advantages, batch.response_mask)
    advantages = torch.where(_advantage_mask(batch) if mask is None else mask, advantages, 0.0)
    dtype = batch.token_rewards.dtype
    return AdvantageOutput(advantages=advantages.to(dtype), returns=returns.to(dtype))


def _outcome(batch: AdvantageBatch, per_sample: torch.Tensor) -> AdvantageOutput:
    """Broadcast one value per sample over its advantage-mask tokens (a single multiply, as the
    tensors are large and this is all the work there is).  ``returns`` is the same tensor."""
    dtype = batch.token_rewards.dtype
    mask = batch.advantage_mask if batch.advantage_mask is not None else batch.response_mask
    weights = mask if mask.dtype == dtype else mask.bool().to(dtype)
    advantages = per_sample.to(dtype).unsqueeze(1) * weights
    return AdvantageOutput(advantages=advantages, returns=advantages)


def _scores(batch: AdvantageBatch) -> torch.Tensor:
    """Each sample's total reward, accumulated in float64."""
    return batch.token_rewards.sum(dim=1, dtype=torch.float64)


def _gae_over(
    batch: AdvantageBatch, name: str, steps: torch.Tensor, gamma: float, lam: float, whiten: bool,
    mask: torch.Tensor,
) -> AdvantageOutput:
    values = _values(batch, name)
    delta = torch.add(batch.token_rewards.to(torch.float64), next_step_values(values, steps), alpha=gamma)
    advantages = reverse_linear_scan(delta.sub_(values), steps, gamma * lam)
    returns = torch.where(steps, advantages + values, 0.0)
    return _finish(batch, advantages, returns, whiten, mask)


# ---------------------------------------------------------------------------------- outcome
def grpo(batch: AdvantageBatch, /, norm_by_std: bool = True, epsilon: float = 1e-6) -> AdvantageOutput:
    """GRPO: each sample's total reward against its group, ``(R - mean) / (std + eps)``."""
    _check_batch(batch, "grpo")
    scores = _scores(batch)
    stats = group_stats(scores, _group_index(batch, "grpo"))
    centred = scores - stats.mean
    return _outcome(batch, centred / (stats.std + float(epsilon)) if norm_by_std else centred)


def dr_grpo(batch: AdvantageBatch, /) -> AdvantageOutput:
    """Dr. GRPO: GRPO without the std division (removes the difficulty bias)."""
    return grpo(batch, norm_by_std=False)


def rloo(batch: AdvantageBatch, /) -> AdvantageOutput:
    """RLOO: ``R_i - mean_{j != i} R_j`` within the group (a lone sample keeps ``R_i``)."""
    _check_batch(batch, "rloo")
    scores = _scores(batch)
    stats = group_stats(scores, _group_index(batch, "rloo"))
    others = (stats.total - scores) / (stats.count - 1).clamp(min=1)
    return _outcome(batch, torch.where(stats.count > 1, scores - others, scores))


def reinforce_plus_plus(batch: AdvantageBatch, /, gamma: float = 1.0, whiten: bool = True) -> AdvantageOutput:
    """REINFORCE++: discounted reward-to-go over the advantage-mask tokens (observation tokens are
    skipped), whitened over the loss mask.  Returns are the unwhitened reward-to-go."""
    _check_batch(batch, "reinforce_plus_plus")
    gamma = _check_unit("gamma", gamma)
    steps = _advantage_mask(batch)
    returns = reverse_linear_scan(batch.token_rewards, steps, gamma)
    return _finish(batch, returns, returns, whiten, steps)


def reinforce_plus_plus_baseline(batch: AdvantageBatch, /, whiten: bool = True) -> AdvantageOutput:
    """REINFORCE++ with a group-mean baseline: ``R - mean_g`` on every token, whitened.

    The whitening statistics of a per-row constant need only per-row token counts, so the whole
    estimator is one broadcast over the tokens, like GRPO's.
    """
    _check_batch(batch, "reinforce_plus_plus_baseline")
    scores = _scores(batch)
    centred = scores - group_stats(scores, _group_index(batch, "reinforce_plus_plus_baseline")).mean
    if whiten:
        loss_counts = batch.response_mask.sum(dim=1, dtype=torch.float64)
        if batch.advantage_mask is None or batch.advantage_mask is batch.response_mask:
            counts = loss_counts  # loss tokens holding the row's value (the others hold 0)
        else:
            counts = (batch.response_mask.bool() & batch.advantage_mask.bool()).sum(dim=1).to(torch.float64)
        total = int(loss_counts.sum().item())
        mean = (counts * centred).sum() / (total + WHITEN_EPS)
        if total < 2:
            centred = centred - mean
        else:
            spread = (counts * (centred - mean).square()).sum() + ((loss_counts - counts) * mean.square()).sum()
            variance = spread / (total + WHITEN_EPS) * total / (total - 1)
            centred = (centred - mean) * torch.rsqrt(variance + WHITEN_EPS)
    return _outcome(batch, centred)


# ------------------------------------------------------------------------------- GAE family
def gae(batch: AdvantageBatch, /, gamma: float = 1.0, lam: float = 1.0, whiten: bool = True) -> AdvantageOutput:
    """Classic GAE: every position up to the last assistant token is a TD step (no skipping)."""
    _check_batch(batch, "gae")
    gamma, lam = _check_unit("gamma", gamma), _check_unit("lam", lam)
    mask = _advantage_mask(batch)
    active = mask | batch.response_mask.bool()
    last = torch.where(active, positions(active), -1).amax(dim=1, keepdim=True)
    return _gae_over(batch, "gae", positions(active) <= last, gamma, lam, whiten, mask)


def masked_gae(
    batch: AdvantageBatch, /, gamma: float = 1.0, lam: float = 1.0, whiten: bool = True
) -> AdvantageOutput:
    """GAE that steps only through advantage-mask tokens (VAGEN ``masked_gae``, verl ``gae``)."""
    _check_batch(batch, "masked_gae")
    gamma, lam = _check_unit("gamma", gamma), _check_unit("lam", lam)
    mask = _advantage_mask(batch)
    return _gae_over(batch, "masked_gae", mask, gamma, lam, whiten, mask)


def bilevel_gae(
    batch: AdvantageBatch,
    /,
    gamma: float = 1.0,
    lam: float = 1.0,
    turn_gamma: float = 0.95,
    turn_lam: float = 1.0,
    whiten: bool = True,
) -> AdvantageOutput:
    """VAGEN's bi-level GAE: turn-level GAE across turns, token-level GAE within each turn."""
    _check_batch(batch, "bilevel_gae")
    gamma, lam = _check_unit("gamma", gamma), _check_unit("lam", lam)
    turn_gamma, turn_lam = _check_unit("turn_gamma", turn_gamma), _check_unit("turn_lam", turn_lam)
    values = _values(batch, "bilevel_gae")
    mask = _advantage_mask(batch)
    layout = turn_layout(batch.turn_ends, mask)
    turn_advantages = turn_level_gae(
        layout.per_turn_sum(batch.token_rewards.to(torch.float64)), layout.at_ends(values), turn_gamma, turn_lam
    )
    steps = (mask | layout.ends) & layout.inside
    rank = steps.cumsum(dim=1)
    inner = torch.mul(next_step_values(values, steps, rank), gamma).sub_(values)
    delta = torch.where(layout.ends, layout.broadcast(turn_advantages), inner)
    # Every turn end is a step, so the scan's segments are the turns.
    advantages = reverse_linear_scan(delta, steps, gamma * lam, segments=layout.turn_id, rank=rank)
    returns = torch.where(steps, advantages + values, 0.0)
    return _finish(batch, advantages, returns, whiten, mask)


def turnwise_gae(
    batch: AdvantageBatch, /, turn_gamma: float = 0.95, turn_lam: float = 1.0, whiten: bool = True
) -> AdvantageOutput:
    """Turn-wise GAE: the turn-level advantage on every token of the turn (no token discounting)."""
    _check_batch(batch, "turnwise_gae")
    turn_gamma, turn_lam = _check_unit("turn_gamma", turn_gamma), _check_unit("turn_lam", turn_lam)
    values = _values(batch, "turnwise_gae")
    mask = _advantage_mask(batch)
    layout = turn_layout(batch.turn_ends, mask)
    turn_values = layout.at_ends(values)
    turn_advantages = turn_level_gae(
        layout.per_turn_sum(batch.token_rewards.to(torch.float64)), turn_values, turn_gamma, turn_lam
    )
    tokens = mask & layout.inside
    advantages = torch.where(tokens, layout.broadcast(turn_advantages), 0.0)
    returns = torch.where(tokens, layout.broadcast(turn_advantages + turn_values), 0.0)
    return _finish(batch, advantages, returns, whiten, mask)


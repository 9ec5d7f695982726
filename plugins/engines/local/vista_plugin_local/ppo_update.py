"""The RL step's scoring and update: old log-probs (and reference log-probs and values) of the
rollout's sequences, then clipped-ratio policy-gradient epochs over mini-batches.

Kept apart from the rollout half of the step (:mod:`vista_plugin_local.rl_step`) because this half
is pure tensors: the same samples, advantages and seed give the same update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch

from vista_plugin_local.advantages import build_advantage_batch
from vista_plugin_local.config import Layout
from vista_plugin_local.losses import Denominators, aggregate, clipped_policy_loss, kl_k3, value_loss
from vista_plugin_local.optim import Optimization
from vista_plugin_local.packed_forward import row_order, score_rows
from vista_plugin_local.policy import Policy, micro_batches
from vista_plugin_local.samples import TrainSample
from vista_plugin_local.step_metrics import UpdateMetrics
from vista_rl.config import AlgorithmSection


@dataclass(frozen=True)
class OldScores:
    """What the rollout-time model said about the step's sequences, each ``[rows, width]`` padded to
    the longest row, or ``None`` when it was not scored: ``logprobs`` are skipped when the update's
    own first forward gives them (:func:`old_logprobs_are_update_logprobs`: ratio 1),
    ``ref_logprobs`` exist only with a KL penalty, ``values`` only with a value head."""

    logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None


@dataclass
class LossSums:
    """The losses summed over micro-batches (one optimizer step) or over optimizer steps (the update);
    ``grad_norm`` is set per optimizer step."""

    loss: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    clip_fraction: float = 0.0
    value_loss: float = 0.0
    grad_norm: float = 0.0

    def add(self, other: LossSums) -> None:
        for name in _LOSS_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


_LOSS_FIELDS = tuple(item.name for item in fields(LossSums))


def old_logprobs_are_update_logprobs(algorithm: AlgorithmSection, policy: Policy) -> bool:
    """One epoch over one mini-batch, no KL reference and no value head: the update's only
    forward runs the very policy that sampled, so its detached log-probs are the old log-probs
    (ratio 1) and a separate pass would compute the same numbers again."""
    return (algorithm.ppo_epochs == 1 and algorithm.mini_batches == 1 and algorithm.kl_coef == 0
            and policy.value_head is None)


@torch.no_grad()
def score_episodes(policy: Policy, episodes: list[TrainSample], temperature: float, *, reference: bool,
                   micro_batch_size: int, layout: Layout = "padded") -> OldScores:
    """Rollout-time log-probs (and, with ``reference``, the reference model's; with a value head,
    values) of every episode, padded to the longest; scored in micro-batches of ``layout``
    (packed layouts score the loss positions only: every use aggregates under the loss mask)."""
    policy.train(False)
    width = max(len(episode.tokens) for episode in episodes)
    wants_values = policy.value_head is not None
    logprobs: list[torch.Tensor] = []
    ref_logprobs: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    seqs = [episode.tokens for episode in episodes]
    order = row_order(policy, seqs, layout)
    with policy.shared_vision(seqs, micro_batch_size):
        for chunk in micro_batches(order, micro_batch_size):
            rows = [seqs[r] for r in chunk]
            scores, _ = score_rows(policy, rows, temperature, layout=layout, values=wants_values)
            logprobs.append(_pad(scores.logprobs, width))
            if scores.values is not None:
                values.append(_pad(scores.values, width))
            if reference:
                ref, _ = score_rows(policy, rows, temperature, layout=layout, reference=True)
                ref_logprobs.append(_pad(ref.logprobs, width))
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))

    def joined(parts: list[torch.Tensor]) -> torch.Tensor | None:  # back in the episodes' order
        return torch.cat(parts).cpu()[back] if parts else None

    return OldScores(logprobs=joined(logprobs), ref_logprobs=joined(ref_logprobs), values=joined(values))


class PolicyUpdate:
    """``ppo_epochs`` passes over the step's episodes in ``mini_batches`` optimizer steps each."""

    def __init__(self, policy: Policy, optimization: Optimization, algorithm: AlgorithmSection, *,
                 value_coef: float, micro_batch_size: int, max_grad_norm: float | None,
                 layout: Layout = "padded") -> None:
        self.policy = policy
        #: How micro-batches are scored (:mod:`vista_plugin_local.packed_forward`).
        self.layout: Layout = layout
        self.optimization = optimization
        self.algorithm = algorithm
        self.value_coef = value_coef
        self.micro_batch_size = micro_batch_size
        self.max_grad_norm = max_grad_norm

    def __call__(self, episodes: list[TrainSample], old: OldScores, advantages: torch.Tensor,
                 returns: torch.Tensor, temperature: float, shuffle_seed: int) -> UpdateMetrics:
        """Averaged losses of every optimizer step, ``optimizer_steps`` taken and ``nan_skipped``
        (some step's loss or gradient was not finite and was dropped)."""
        algorithm, size_micro = self.algorithm, self.micro_batch_size
        self.policy.train(True)
        sums = LossSums()
        updates, skipped = 0, 0
        generator = torch.Generator().manual_seed(shuffle_seed)
        for _epoch in range(algorithm.ppo_epochs):
            order = torch.randperm(len(episodes), generator=generator).tolist()
            size = math.ceil(len(episodes) / algorithm.mini_batches)
            for start in range(0, len(order), size):
                rows = order[start:start + size]
                # rows that share a prefix go to the same micro-batch (the sum over rows is the same)
                rows = [rows[i] for i in row_order(self.policy, [episodes[r].tokens for r in rows], self.layout)]
                mask_all = torch.tensor([sum(episodes[r].tokens.loss_mask) for r in rows], dtype=torch.float32)
                denom = Denominators(tokens=float(mask_all.sum()), sequences=float(len(rows)))
                self.optimization.zero_grad()
                parts = LossSums()
                with self.policy.shared_vision([episodes[r].tokens for r in rows], size_micro):
                    for chunk in micro_batches(rows, size_micro):
                        parts.add(self._micro_loss(episodes, chunk, old, advantages, returns, temperature, denom))
                parts.grad_norm, finite = self.optimization.step(self.max_grad_norm, parts.loss)
                skipped += not finite
                sums.add(parts)
                updates += 1
        mask = build_advantage_batch(episodes, advantages.shape[1], None).response_mask
        return _update_metrics(sums, max(updates, 1), with_values=self.policy.value_head is not None,
                               nan_skipped=skipped > 0, optimizer_steps=updates - skipped,
                               advantage_mean=float((advantages * mask).sum() / mask.sum().clamp(min=1)))

    def _micro_loss(self, episodes: list[TrainSample], rows: list[int], old: OldScores,
                    advantages: torch.Tensor, returns: torch.Tensor, temperature: float,
                    denom: Denominators) -> LossSums:
        algorithm, policy = self.algorithm, self.policy
        scores, mask = score_rows(policy, [episodes[r].tokens for r in rows], temperature, layout=self.layout,
                                  entropy=True, values=policy.value_head is not None)
        width = mask.shape[1]
        pick = torch.tensor(rows)

        def take(tensor: torch.Tensor) -> torch.Tensor:
            return tensor[pick, :width].to(policy.device)

        # Without an old-log-prob pass the policy has not moved since the rollout: ratio 1.
        old_logprobs = take(old.logprobs) if old.logprobs is not None else scores.logprobs.detach()
        pg, clipped = clipped_policy_loss(scores.logprobs, old_logprobs, take(advantages),
                                          algorithm.clip_ratio_low, algorithm.clip_ratio_high)
        mode = algorithm.loss_agg
        pg_loss = aggregate(pg, mask, mode, denom)
        assert scores.entropy is not None
        entropy = aggregate(scores.entropy, mask, mode, denom)
        loss = pg_loss - algorithm.entropy_coef * entropy
        kl_value = torch.zeros(())
        if old.ref_logprobs is not None:
            kl_value = aggregate(kl_k3(scores.logprobs, take(old.ref_logprobs)), mask, mode, denom)
            loss = loss + algorithm.kl_coef * kl_value
        elif algorithm.kl_coef == 0:
            with torch.no_grad():  # report the policy's drift from the rollout policy instead
                kl_value = aggregate(kl_k3(scores.logprobs, old_logprobs), mask, mode, denom)
        v_loss = torch.zeros(())
        if scores.values is not None and old.values is not None:
            v_loss = aggregate(value_loss(scores.values, take(old.values), take(returns), algorithm.value_clip),
                               mask, mode, denom)
            loss = loss + self.value_coef * v_loss
        loss.backward()
        return LossSums(loss=float(loss.detach()), pg_loss=float(pg_loss.detach()), kl=float(kl_value.detach()),
                        entropy=float(entropy.detach()), value_loss=float(v_loss.detach()),
                        clip_fraction=float(aggregate(clipped, mask, mode, denom).detach()))


def _update_metrics(sums: LossSums, updates: int, *, with_values: bool, nan_skipped: bool, optimizer_steps: int,
                    advantage_mean: float) -> UpdateMetrics:
    """The update's record: each loss averaged over ``updates`` optimizer steps, in the key order
    ``metrics.jsonl`` has always had (``value_loss`` only with a value head)."""
    metrics = UpdateMetrics(loss=sums.loss / updates, pg_loss=sums.pg_loss / updates, kl=sums.kl / updates,
                            entropy=sums.entropy / updates, clip_fraction=sums.clip_fraction / updates,
                            value_loss=sums.value_loss / updates, grad_norm=sums.grad_norm / updates,
                            nan_skipped=nan_skipped, optimizer_steps=optimizer_steps, advantage_mean=advantage_mean)
    if not with_values:
        del metrics["value_loss"]
    return metrics


def _pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    if tensor.shape[1] >= width:
        return tensor[:, :width]
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]))

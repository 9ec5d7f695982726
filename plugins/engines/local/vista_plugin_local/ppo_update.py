"""The RL step's scoring and update: old log-probs (and reference log-probs and values) of the
rollout's sequences, then clipped-ratio policy-gradient epochs over mini-batches.

Kept apart from the rollout half of the step (:mod:`vista_plugin_local.rl_step`) because this half
is pure tensors: the same samples, advantages and seed give the same update.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from vista_plugin_local.advantages import build_advantage_batch
from vista_plugin_local.config import Layout
from vista_plugin_local.losses import Denominators, aggregate, clipped_policy_loss, kl_k3, value_loss
from vista_plugin_local.optim import Optimization
from vista_plugin_local.packed_forward import row_order, score_rows
from vista_plugin_local.policy import Policy, micro_batches
from vista_plugin_local.samples import TrainSample
from vista_rl.config import AlgorithmSection

#: Accumulated per optimizer step and averaged over the step's updates.
LOSS_KEYS = ("loss", "pg_loss", "kl", "entropy", "clip_fraction", "value_loss", "grad_norm")


def old_logprobs_are_update_logprobs(algorithm: AlgorithmSection, policy: Policy) -> bool:
    """One epoch over one mini-batch, no KL reference and no value head: the update's only
    forward runs the very policy that sampled, so its detached log-probs are the old log-probs
    (ratio 1) and a separate pass would compute the same numbers again."""
    return (algorithm.ppo_epochs == 1 and algorithm.mini_batches == 1 and algorithm.kl_coef == 0
            and policy.value_head is None)


@torch.no_grad()
def score_episodes(policy: Policy, episodes: list[TrainSample], temperature: float, *, reference: bool,
                   micro_batch_size: int, layout: Layout = "padded") -> dict[str, torch.Tensor]:
    """Rollout-time log-probs (and, with ``reference``, the reference model's; with a value head,
    values) of every episode, padded to the longest; scored in micro-batches of ``layout``
    (packed layouts score the loss positions only: every use aggregates under the loss mask)."""
    policy.train(False)
    width = max(len(episode.tokens) for episode in episodes)
    wants_values = policy.value_head is not None
    out: dict[str, list[torch.Tensor]] = {"logprobs": [], "ref_logprobs": [], "values": []}
    seqs = [episode.tokens for episode in episodes]
    order = row_order(policy, seqs, layout)
    with policy.shared_vision(seqs, micro_batch_size):
        for chunk in micro_batches(order, micro_batch_size):
            rows = [seqs[r] for r in chunk]
            scores, _ = score_rows(policy, rows, temperature, layout=layout, values=wants_values)
            out["logprobs"].append(_pad(scores.logprobs, width))
            if scores.values is not None:
                out["values"].append(_pad(scores.values, width))
            if reference:
                ref, _ = score_rows(policy, rows, temperature, layout=layout, reference=True)
                out["ref_logprobs"].append(_pad(ref.logprobs, width))
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))
    return {key: torch.cat(parts).cpu()[back] for key, parts in out.items() if parts}


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

    def __call__(self, episodes: list[TrainSample], old: dict[str, torch.Tensor], advantages: torch.Tensor,
                 returns: torch.Tensor, temperature: float, shuffle_seed: int) -> dict[str, Any]:
        """Averaged losses of every optimizer step, ``optimizer_steps`` taken and ``nan_skipped``
        (some step's loss or gradient was not finite and was dropped)."""
        algorithm, size_micro = self.algorithm, self.micro_batch_size
        self.policy.train(True)
        sums = dict.fromkeys(LOSS_KEYS, 0.0)
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
                parts = dict.fromkeys(sums, 0.0)
                with self.policy.shared_vision([episodes[r].tokens for r in rows], size_micro):
                    for chunk in micro_batches(rows, size_micro):
                        part = self._micro_loss(episodes, chunk, old, advantages, returns, temperature, denom)
                        for key, value in part.items():
                            parts[key] += value
                parts["grad_norm"], finite = self.optimization.step(self.max_grad_norm, parts["loss"])
                skipped += not finite
                for key in sums:
                    sums[key] += parts[key]
                updates += 1
        result: dict[str, Any] = {key: value / max(updates, 1) for key, value in sums.items()}
        result["nan_skipped"] = skipped > 0
        result["optimizer_steps"] = updates - skipped
        mask = build_advantage_batch(episodes, advantages.shape[1], None).response_mask
        result["advantage_mean"] = float((advantages * mask).sum() / mask.sum().clamp(min=1))
        if self.policy.value_head is None:
            result.pop("value_loss")
        return result

    def _micro_loss(self, episodes: list[TrainSample], rows: list[int], old: dict[str, torch.Tensor],
                    advantages: torch.Tensor, returns: torch.Tensor, temperature: float,
                    denom: Denominators) -> dict[str, float]:
        algorithm, policy = self.algorithm, self.policy
        scores, mask = score_rows(policy, [episodes[r].tokens for r in rows], temperature, layout=self.layout,
                                  entropy=True, values=policy.value_head is not None)
        width = mask.shape[1]
        pick = torch.tensor(rows)

        def take(tensor: torch.Tensor) -> torch.Tensor:
            return tensor[pick, :width].to(policy.device)

        # Without an old-log-prob pass the policy has not moved since the rollout: ratio 1.
        old_logprobs = take(old["logprobs"]) if "logprobs" in old else scores.logprobs.detach()
        pg, clipped = clipped_policy_loss(scores.logprobs, old_logprobs, take(advantages),
                                          algorithm.clip_ratio_low, algorithm.clip_ratio_high)
        mode = algorithm.loss_agg
        pg_loss = aggregate(pg, mask, mode, denom)
        assert scores.entropy is not None
        entropy = aggregate(scores.entropy, mask, mode, denom)
        loss = pg_loss - algorithm.entropy_coef * entropy
        kl_value = torch.zeros(())
        if "ref_logprobs" in old:
            kl_value = aggregate(kl_k3(scores.logprobs, take(old["ref_logprobs"])), mask, mode, denom)
            loss = loss + algorithm.kl_coef * kl_value
        elif algorithm.kl_coef == 0:
            with torch.no_grad():  # report the policy's drift from the rollout policy instead
                kl_value = aggregate(kl_k3(scores.logprobs, old_logprobs), mask, mode, denom)
        v_loss = torch.zeros(())
        if scores.values is not None and "values" in old:
            v_loss = aggregate(value_loss(scores.values, take(old["values"]), take(returns), algorithm.value_clip),
                               mask, mode, denom)
            loss = loss + self.value_coef * v_loss
        loss.backward()
        return {"loss": float(loss.detach()), "pg_loss": float(pg_loss.detach()), "kl": float(kl_value.detach()),
                "entropy": float(entropy.detach()), "value_loss": float(v_loss.detach()),
                "clip_fraction": float(aggregate(clipped, mask, mode, denom).detach())}


def _pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    if tensor.shape[1] >= width:
        return tensor[:, :width]
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]))

"""The SFT stage's pieces: its examples (oracle rollouts or a recorded JSONL), the batch order that
makes the data position just the step number, and one supervised update.

The loop that runs them (logging, checkpoints, evaluation) is the trainer's; these functions hold
no run state, so a resumed run rebuilds exactly the batches it would have seen.
"""

from __future__ import annotations

from pathlib import Path

import torch
from rich.console import Console

from vista_plugin_local.chat_tokens import ChatEncoder, EpisodeTokens
from vista_plugin_local.optim import Optimization
from vista_plugin_local.policy import Policy, micro_batches
from vista_plugin_local.sft_data import examples_from_turns, load_jsonl, trajectory_pieces
from vista_plugin_local.step_metrics import SftUpdateMetrics
from vista_rl.config import RunConfig
from vista_rl.rollout import teacher_episodes


def sft_examples(run: RunConfig, encoder: ChatEncoder, per_turn: bool, console: Console) -> list[EpisodeTokens]:
    """The SFT data: ``sft.path``'s recorded trajectories, or the env oracle's episodes on ``sft.seeds``
    (:func:`vista_rl.rollout.teacher_episodes`, shared with the verl engine)."""
    sft, rollout = run.sft, run.rollout
    if sft.source == "jsonl":
        assert sft.path is not None
        examples, report = load_jsonl(Path(sft.path), encoder, per_turn, rollout.window_size)
        console.print(f"SFT data {sft.path}: {report.summary()}")
        return examples
    episodes = teacher_episodes(run)
    examples = [example for trajectory in episodes.kept
                for example in examples_from_turns(trajectory.system_prompt, trajectory_pieces(trajectory),
                                                   encoder, per_turn, rollout.window_size)]
    console.print(episodes.summary() + (f", {len(examples)} per-turn examples" if per_turn else ""))
    return examples


def batch_indices(seed: int, count: int, batch_size: int, step: int) -> list[int]:
    """The example indices of SFT step ``step``: epochs are permutations seeded by (run seed, epoch),
    so the data position is the step number alone."""
    per_epoch = -(-count // batch_size)
    epoch, index = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(count, generator=generator).tolist()
    return order[index * batch_size:(index + 1) * batch_size]


def sft_update(policy: Policy, optimization: Optimization, batch: list[EpisodeTokens], micro_batch_size: int,
               max_grad_norm: float | None) -> SftUpdateMetrics:
    """One optimizer step of token-mean negative log-likelihood on the batch's trainable tokens
    (skipped, with ``nan_skipped``, when the loss or gradient is not finite)."""
    policy.train(True)
    optimization.zero_grad()
    total_tokens = float(sum(sum(example.loss_mask) for example in batch))
    loss_sum = 0.0
    for chunk in micro_batches(batch, micro_batch_size):
        tensors = policy.collate(chunk, left_pad=False)
        scores = policy.score(tensors)
        loss = -(scores.logprobs * tensors["loss_mask"]).sum() / max(total_tokens, 1.0)
        loss.backward()
        loss_sum += float(loss.detach())
    grad_norm, finite = optimization.step(max_grad_norm, loss_sum)
    return {"loss": loss_sum, "grad_norm": grad_norm, "tokens": total_tokens, "nan_skipped": not finite}

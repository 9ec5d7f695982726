"""Log-probs of chosen tokens and the entropy, from final hidden states and the LM head, in chunks.

Why: ``log_softmax`` over ``[tokens x vocabulary]`` logits is the largest tensor of a scoring pass
(a Qwen vocabulary is 152k entries: 0.6 MB per token in fp32, and autograd keeps it, its softmax
and its log for the backward).  Here the logits exist one chunk of rows at a time, forward and
backward: the forward keeps only each row's log-sum-exp and entropy, and the backward recomputes a
chunk's logits from the hidden states to form that chunk's gradient.  The numbers are the ones of
``log_softmax(lm_head(h) / T)`` with the suppressed tokens at -1e9 (what sampling suppresses; a
large finite value, as 0 * -inf is NaN), and under autocast the head's matmul runs in the autocast
dtype as ``nn.Linear`` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

__all__ = ["CHUNK_ELEMENTS", "token_logprobs"]

#: Logit entries per chunk (2^24 fp32 values: 64 MB).
CHUNK_ELEMENTS = 1 << 24
SUPPRESSED = -1e9


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float,
            suppressed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = nn.functional.linear(hidden.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype))
    out = out.float() / temperature
    out[:, suppressed] = SUPPRESSED
    return out


class _ChunkedLogprobs(torch.autograd.Function):
    """(log-prob of each row's target, entropy of each row) with the logits chunk by chunk."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, suppressed: torch.Tensor, temperature: float, chunk: int,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        picked = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        entropy = torch.empty_like(picked)
        lse = torch.empty_like(picked)
        logits = picked  # placeholder: the last chunk's logits are kept when there is only one chunk
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], chunk):
                rows = slice(start, start + chunk)
                logits = _logits(hidden[rows], weight, bias, temperature, suppressed, dtype)
                lse[rows] = torch.logsumexp(logits, dim=-1)
                picked[rows] = logits.gather(-1, targets[rows, None]).squeeze(-1) - lse[rows]
                probs = torch.exp(logits - lse[rows, None])
                entropy[rows] = lse[rows] - (probs * logits).sum(-1)
        # One chunk (what fits the budget anyway) is kept rather than computed again in the backward.
        kept = logits if hidden.shape[0] <= chunk else None
        ctx.save_for_backward(hidden, weight, bias, targets, suppressed, lse, entropy, kept)
        ctx.temperature, ctx.chunk, ctx.dtype = temperature, chunk, dtype
        return picked, entropy

    @staticmethod
    def backward(ctx: Any, grad_picked: torch.Tensor | None, grad_entropy: torch.Tensor | None) -> tuple[Any, ...]:
        hidden, weight, bias, targets, suppressed, lse, entropy, kept = ctx.saved_tensors
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros_like(hidden) if want_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_weight else None
        grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if want_bias else None
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], ctx.chunk):
                rows = slice(start, start + ctx.chunk)
                logits = kept if kept is not None else _logits(hidden[rows], weight, bias, ctx.temperature,
                                                               suppressed, ctx.dtype)
                log_probs = logits - lse[rows, None]
                probs = torch.exp(log_probs)
                grad = torch.zeros_like(logits)
                if grad_picked is not None:
                    grad -= grad_picked[rows, None] * probs
                    grad.scatter_add_(-1, targets[rows, None], grad_picked[rows, None])
                if grad_entropy is not None:
                    grad -= grad_entropy[rows, None] * probs * (log_probs + entropy[rows, None])
                grad[:, suppressed] = 0.0  # the suppressed logits are constants
                grad = (grad / ctx.temperature).to(ctx.dtype)
                if grad_hidden is not None:
                    grad_hidden[rows] = (grad @ weight.to(ctx.dtype)).to(hidden.dtype)
                if grad_weight is not None:
                    grad_weight += (grad.T @ hidden[rows].to(ctx.dtype)).float()
                if grad_bias is not None:
                    grad_bias += grad.float().sum(0)
        return (grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None, None, None)


def token_logprobs(hidden: torch.Tensor, head: nn.Module, targets: torch.Tensor, temperature: float,
                   suppressed: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log p(target), entropy)`` per row of ``hidden`` ``[N, hidden_size]`` under
    ``softmax(head(hidden) / temperature)`` with ``suppressed`` tokens at -1e9, both fp32 ``[N]``."""
    weight: torch.Tensor = head.weight  # type: ignore[assignment]
    bias: torch.Tensor | None = getattr(head, "bias", None)
    device = hidden.device
    dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else weight.dtype
    chunk = max(1, CHUNK_ELEMENTS // max(int(weight.shape[0]), 1))
    banned = torch.tensor(sorted(set(suppressed)), dtype=torch.long, device=device)
    picked, entropy = _ChunkedLogprobs.apply(hidden, weight, bias, targets.to(device), banned,
                                             max(temperature, 1e-6), chunk, dtype)
    return picked, entropy

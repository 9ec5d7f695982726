"""Reverse linear scans over masked token positions, without a Python loop over tokens.

Every GAE-style estimator is one recursion over a row's *step* positions ``p_1 < ... < p_n`` (the
tokens the recursion visits; observation tokens are skipped by leaving them out of ``steps``)::

    A[p_i] = delta[p_i] + coef * A[p_{i+1}]      (0 past the last step, or if p_i is a reset)

Unrolled, ``A[p_i] = sum_{j >= i, same segment} coef**(j - i) * delta[p_j]``, where a reset ends a
segment.  With ``k`` the running count of steps, ``coef**(j - i) = coef**k_j / coef**k_i``: one
reverse cumulative sum of ``coef**k_j * delta[p_j]``, minus the part beyond the segment end, scaled
by ``coef**-k_i``.  Computed in float64 over position blocks short enough that ``coef**-k`` stays
far from overflow (for ``coef = 0.95`` one block covers 11,000 tokens; only a small ``coef`` needs
more than one block, and blocks are chained by carrying the first later step's value).
"""

from __future__ import annotations

import math

import torch

#: Largest power of ten that ``coef**-k`` may reach inside one block (float64 tops out near 1e308).
_MAX_DECADES = 250.0


def positions(like: torch.Tensor) -> torch.Tensor:
    """``[1, tokens]`` long tensor of token positions, on ``like``'s device."""
    return torch.arange(like.shape[-1], device=like.device).unsqueeze(0)


def next_index(flags: torch.Tensor, strict: bool = False) -> torch.Tensor:
    """For every position, the first position ``j >= i`` (``j > i`` if ``strict``) with a flag.

    Rows without such a position get ``tokens`` (one past the end), so callers can gather from a
    tensor padded with one extra column.
    """
    tokens = flags.shape[-1]
    marked = torch.where(flags.bool(), positions(flags), tokens)
    if strict:
        marked = torch.cat([marked[:, 1:], torch.full_like(marked[:, :1], tokens)], dim=1)
    return torch.cummin(marked.flip(-1), dim=-1).values.flip(-1)


def pad_column(values: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """``values`` with one extra column holding ``fill`` (the target of "no such position")."""
    return torch.cat([values, torch.full_like(values[:, :1], fill)], dim=1)


def block_length(coef: float, tokens: int) -> int:
    """How many positions one block may span so that ``coef**-steps`` stays finite."""
    if coef >= 1.0:
        return max(tokens, 1)
    return max(1, min(tokens, int(_MAX_DECADES / -math.log10(coef))))


def next_step_values(values: torch.Tensor, steps: torch.Tensor, rank: torch.Tensor | None = None) -> torch.Tensor:
    """For every position, ``values`` at the first step strictly after it (0 if there is none).

    Steps are packed by their running count (a scatter) and read back one slot further on (a
    gather): two passes, no scan over tokens.  ``rank`` (``steps.cumsum(1)``) may be passed in.
    """
    step_flags = steps.bool()
    batch, tokens = values.shape
    if rank is None:
        rank = step_flags.cumsum(dim=1)  # the packed slot of the next step, for every position
    packed = torch.zeros(batch, tokens + 1, dtype=values.dtype, device=values.device)
    packed.scatter_(1, torch.where(step_flags, rank - 1, tokens), values)
    packed[:, tokens] = 0.0  # non-steps were parked here; it is also "after the last step"
    return packed.gather(1, rank)


def reverse_linear_scan(
    delta: torch.Tensor,
    steps: torch.Tensor,
    coef: float,
    resets: torch.Tensor | None = None,
    segments: torch.Tensor | None = None,
    rank: torch.Tensor | None = None,
) -> torch.Tensor:
    """Solve ``A[p] = delta[p] + coef * A[next step after p]`` for every step ``p`` of every row.

    ``delta`` is ``[batch, tokens]``; ``steps`` marks the positions the recursion visits (others are
    skipped and get 0); ``resets`` marks steps whose ``A`` does not look further ahead (e.g. the
    last token of a turn).  Callers that already have them may pass ``segments`` instead of
    ``resets`` (long, the number of resets strictly before each position) and ``rank``
    (``steps.cumsum(1)``).  ``coef`` must lie in ``[0, 1]``.  Returns float64.
    """
    if not 0.0 <= coef <= 1.0:
        raise ValueError(f"scan coefficient must lie in [0, 1], got {coef}")
    if delta.dim() != 2 or delta.shape != steps.shape:
        raise ValueError(f"delta {tuple(delta.shape)} and steps {tuple(steps.shape)} must be equal 2-D shapes")
    step_flags = steps.bool()
    deltas = torch.where(step_flags, delta.to(torch.float64), 0.0)
    batch, tokens = deltas.shape
    if coef == 0.0 or tokens == 0:
        return deltas
    segment = segments
    if segment is None and resets is not None:
        reset_flags = (resets.bool() & step_flags).to(torch.long)
        segment = reset_flags.cumsum(dim=1) - reset_flags  # resets strictly before each position
    if rank is None:
        rank = step_flags.cumsum(dim=1)  # steps up to and including each position
    length = block_length(coef, tokens)
    if length >= tokens:
        return torch.where(step_flags, _scan_block(deltas, rank, segment, coef, 0, tokens), 0.0)
    result = torch.zeros(batch, tokens + 1, dtype=torch.float64, device=deltas.device)
    next_step = next_index(step_flags)
    for start in reversed(range(0, tokens, length)):
        end = min(start + length, tokens)
        block = _scan_block(deltas, rank, segment, coef, start, end)
        if end < tokens:
            block = block + _carry(result, rank, next_step, segment, coef, start, end)
        result[:, start:end] = torch.where(step_flags[:, start:end], block, 0.0)
    return result[:, :tokens]


def _scan_block(
    deltas: torch.Tensor,
    rank: torch.Tensor,
    segment: torch.Tensor | None,
    coef: float,
    start: int,
    end: int,
) -> torch.Tensor:
    """The recursion restricted to positions ``[start, end)`` (later blocks contribute nothing)."""
    weighted = deltas[:, start:end]
    seg = None
    if segment is not None:
        seg = segment[:, start:end] if start == 0 else segment[:, start:end] - segment[:, start : start + 1]
        count = int(seg[:, -1].max().item()) + 2  # segment ids never decrease along a row
        # Per-segment totals of the block: what lies in later segments is dropped below.
        totals = torch.zeros(weighted.shape[0], count, dtype=torch.float64, device=weighted.device)
    if coef >= 1.0:
        # Sum from i to the end of i's segment = (sum of segments up to i's) - (prefix before i).
        prefix = weighted.cumsum(dim=-1)
        if seg is None:
            return weighted.sum(dim=-1, keepdim=True) - prefix + weighted
        upto = totals.scatter_add_(1, seg, weighted).cumsum(dim=-1)
        return upto.gather(1, seg) - prefix + weighted
    before = rank[:, start - 1 : start] if start > 0 else torch.zeros_like(rank[:, :1])
    scale = torch.pow(coef, (rank[:, start:end] - before).to(torch.float64))
    weighted = weighted * scale
    # Suffix sums straight from the end: a prefix-sum difference would cancel catastrophically once
    # divided by the tiny ``scale`` of late positions.
    suffix = weighted.flip(-1).cumsum(dim=-1).flip(-1)
    if seg is not None:
        later = totals.scatter_add_(1, seg, weighted).flip(-1).cumsum(dim=-1).flip(-1)  # segments >= s
        suffix = suffix - later.gather(1, seg + 1)
    return suffix / scale


def _carry(
    result: torch.Tensor,
    rank: torch.Tensor,
    next_step: torch.Tensor,
    segment: torch.Tensor | None,
    coef: float,
    start: int,
    end: int,
) -> torch.Tensor:
    """What the first step at or after ``end`` (already solved) adds to positions ``[start, end)``."""
    head = next_step[:, end : end + 1]  # [batch, 1]; ``tokens`` where no later step exists
    head_value = result.gather(1, head)
    head_rank = pad_column(rank, float(rank.shape[1] + 1)).gather(1, head)
    carried = torch.pow(coef, (head_rank - rank[:, start:end]).to(torch.float64)) * head_value
    if segment is not None:
        head_segment = pad_column(segment, -1.0).gather(1, head)
        carried = torch.where(segment[:, start:end] == head_segment, carried, 0.0)
    return carried

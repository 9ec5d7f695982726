"""Turn structure of multi-turn token rows: which turn each token belongs to, per-turn sums.

A row is ``obs_0 resp_1 obs_1 resp_2 ...``; ``turn_ends`` marks the last token of every assistant
turn.  Turn ``k`` covers the tokens after turn ``k-1``'s end up to and including its own end, so the
observation that precedes a response belongs to that response's turn.  Tokens after the last turn
end belong to no turn (``turn_id == n_turns``); their rewards are credited to the last turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def run_ends(mask: torch.Tensor) -> torch.Tensor:
    """Bool ``[batch, tokens]``: the last position of every run of non-zero ``mask`` entries."""
    flags = mask.bool()
    following = torch.cat([flags[:, 1:], torch.zeros_like(flags[:, :1])], dim=1)
    return flags & ~following


@dataclass
class TurnLayout:
    """Where the turns of every row are.

    - ``ends``: bool ``[batch, tokens]``, last token of each turn.
    - ``turn_id``: long ``[batch, tokens]``, index of the token's turn (``n_turns`` after the last end).
    - ``n_turns``: long ``[batch]``.
    - ``max_turns``: the largest ``n_turns`` in the batch (a Python int, at least 1).
    """

    ends: torch.Tensor
    turn_id: torch.Tensor
    n_turns: torch.Tensor
    max_turns: int

    @property
    def inside(self) -> torch.Tensor:
        """Bool ``[batch, tokens]``: tokens that belong to some turn."""
        return self.turn_id < self.n_turns.unsqueeze(1)

    def per_turn_sum(self, token_values: torch.Tensor) -> torch.Tensor:
        """``[batch, max_turns]`` sums of ``token_values`` over each turn; trailing tokens count
        towards the last turn; rows without turns get zeros."""
        last = (self.n_turns - 1).clamp(min=0).unsqueeze(1)
        target = torch.minimum(self.turn_id, last)
        sums = torch.zeros(token_values.shape[0], self.max_turns, dtype=token_values.dtype,
                           device=token_values.device)
        sums.scatter_add_(1, target, token_values)
        has_turns = (self.n_turns > 0).unsqueeze(1)
        return torch.where(has_turns, sums, 0.0)

    def at_ends(self, token_values: torch.Tensor) -> torch.Tensor:
        """``[batch, max_turns]``: ``token_values`` at each turn's end (0 for missing turns)."""
        out = torch.zeros(token_values.shape[0], self.max_turns + 1, dtype=token_values.dtype,
                          device=token_values.device)
        slot = torch.where(self.ends, self.turn_id, self.max_turns)  # non-ends land in a spare slot
        out.scatter_(1, slot, token_values)
        return out[:, : self.max_turns]

    def broadcast(self, per_turn: torch.Tensor) -> torch.Tensor:
        """``[batch, tokens]``: each token gets its turn's value (0 outside turns)."""
        padded = torch.cat([per_turn, torch.zeros_like(per_turn[:, :1])], dim=1)
        return padded.gather(1, self.turn_id.clamp(max=self.max_turns))


def turn_layout(turn_ends: torch.Tensor | None, fallback_mask: torch.Tensor) -> TurnLayout:
    """The layout from explicit ``turn_ends`` or, when absent, from the runs of ``fallback_mask``
    (every contiguous run of assistant tokens is one turn)."""
    ends = run_ends(fallback_mask) if turn_ends is None else turn_ends.bool()
    ends_long = ends.to(torch.long)
    counts = ends_long.cumsum(dim=1)
    turn_id = counts - ends_long  # ends strictly before each token
    n_turns = counts[:, -1] if counts.shape[1] else torch.zeros(counts.shape[0], dtype=torch.long)
    max_turns = max(int(n_turns.max().item()) if n_turns.numel() else 0, 1)
    return TurnLayout(ends=ends, turn_id=turn_id, n_turns=n_turns, max_turns=max_turns)


def turn_level_gae(
    turn_rewards: torch.Tensor, turn_values: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """GAE across turns: ``delta_k = r_k + gamma V_{k+1} - V_k`` (``V_{K+1} = 0``), ``A_k = delta_k +
    gamma lam A_{k+1}``.  Inputs ``[batch, turns]`` with missing turns zero; one small matmul."""
    turns = turn_rewards.shape[1]
    next_values = torch.cat([turn_values[:, 1:], torch.zeros_like(turn_values[:, :1])], dim=1)
    delta = turn_rewards + gamma * next_values - turn_values
    index = torch.arange(turns, device=delta.device)
    gap = (index.unsqueeze(1) - index.unsqueeze(0)).to(delta.dtype)  # [j, k] = j - k
    discount = torch.where(gap >= 0, torch.pow(gamma * lam, gap.clamp(min=0)), 0.0)
    return delta @ discount

"""Log-probabilities of the sampled tokens, recorded while ``generate`` samples, so the rollout hands
the trainer each token's sampling log-prob without a second forward pass."""

from __future__ import annotations

import torch


class LogprobRecorder:
    """A logits processor that keeps the log-probabilities of the sampled tokens.

    Custom processors run after the built-in ones (token suppression) and before the sampling
    warpers, so it sees the logits :meth:`Policy.score` scores; only one step's distribution is
    held at a time (a vocabulary-sized row per sequence, not one per generated token)."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.previous: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self._take(input_ids[:, -1])
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        if self.previous is not None:
            self.picked.append(self.previous.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
            self.previous = None

    def finish(self, new: torch.Tensor) -> torch.Tensor:
        """Log-probs aligned with the generated ids ``new`` (batch x steps)."""
        if new.shape[1] > len(self.picked):
            self._take(new[:, len(self.picked)])
        if not self.picked:
            return torch.zeros(new.shape, dtype=torch.float32)
        values = torch.stack(self.picked, dim=1).float().cpu()
        if values.shape[1] < new.shape[1]:
            values = torch.nn.functional.pad(values, (0, new.shape[1] - values.shape[1]))
        return values[:, :new.shape[1]]

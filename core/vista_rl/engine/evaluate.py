"""Held-out evaluation: success rate (Wilson 95% CI) and mean reward on seeds never trained on."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vista_rl._stats import Estimate, mean, proportion
from vista_rl.engine.policy import Policy
from vista_rl.engine.rollout import RolloutStats, run_rollout
from vista_rl.env import Env


@dataclass
class EvalResult:
    label: str
    success: Estimate
    reward: Estimate
    episodes: int

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "success": self.success.to_dict(), "reward": self.reward.to_dict(),
                "episodes": self.episodes}


def evaluate(policy: Policy, env_factory: Callable[[], Env], env_id: str, seeds: list[int], max_turns: int,
             max_tokens: int, temperature: float, label: str, batch_size: int, seed: int = 0) -> EvalResult:
    """Runs in its own RNG scope so that evaluating never changes the training run's random stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sampler = functools.partial(policy.generate, max_new_tokens=max_tokens, temperature=temperature)
        episodes = run_rollout(env_factory, env_id, seeds, 1, policy.encoder, sampler, max_turns,
                               batch_size=batch_size, stats=RolloutStats())
    successes = sum(1 for episode in episodes if episode.success)
    return EvalResult(label, proportion(successes, len(episodes)),
                      mean([episode.total_reward for episode in episodes]), len(episodes))

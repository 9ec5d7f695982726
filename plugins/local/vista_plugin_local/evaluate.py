"""Held-out evaluation: success rate (Wilson 95% CI) and mean reward on seeds never trained on,
played through the same core rollout engine as training (tools, reflection, windows, timeouts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from vista_rl import SamplingParams
from vista_rl.rollout import EpisodeSpec, Estimate, RolloutEngine, mean, proportion


@dataclass
class EvalResult:
    label: str
    success: Estimate
    reward: Estimate
    episodes: int
    failed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "success": self.success.to_dict(), "reward": self.reward.to_dict(),
                "episodes": self.episodes, "failed_episodes": self.failed}


def evaluate(engine: RolloutEngine, specs: list[EpisodeSpec], sampling: SamplingParams, label: str,
             seed: int = 0) -> EvalResult:
    """Runs in its own RNG scope so that evaluating never changes the training run's random stream.
    An episode that failed (env/tool error) counts as not solved and is counted in ``failed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        engine.sampling = sampling
        trajectories = engine.run(specs)
    successes = sum(1 for trajectory in trajectories if trajectory.success)
    failed = sum(1 for trajectory in trajectories if trajectory.failure)
    return EvalResult(label, proportion(successes, len(trajectories)),
                      mean([trajectory.total_reward for trajectory in trajectories]), len(trajectories), failed)

"""Held-out evaluation: success rate (Wilson 95% CI) and mean reward on seeds never trained on,
played through the same core rollout engine as training (tools, reflection, windows, timeouts).

:class:`HeldOutEval` is the one evaluation the trainer (after each stage) and the main job report
(``python -m vista_plugin_local.main_job``) both run, so their numbers are comparable by construction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from vista_plugin_local.policy_backend import PolicyBackend
from vista_rl import SamplingParams
from vista_rl.config import RunConfig
from vista_rl.rollout import (
    EpisodeSpec,
    EpisodeStats,
    Estimate,
    RolloutEngine,
    episode_specs,
    mean,
    proportion,
)


@dataclass
class EvalResult:
    label: str
    success: Estimate
    reward: Estimate
    episodes: int
    failed: int = 0
    cut_off: int = 0  # ended by a limit the env did not choose (see vista_rl.turn_limit)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "success": self.success.to_dict(), "reward": self.reward.to_dict(),
                "episodes": self.episodes, "failed_episodes": self.failed, "cut_off_episodes": self.cut_off}


def _cuda_devices() -> list[int]:
    """Every CUDA device whose RNG an evaluation could touch: ``torch.manual_seed`` reseeds them
    all.  None while CUDA is not initialised (a CPU run), so evaluating never starts a context."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []


def evaluate(engine: RolloutEngine, specs: list[EpisodeSpec], sampling: SamplingParams, label: str,
             seed: int = 0) -> EvalResult:
    """Runs in its own RNG scope (the CPU's and every initialised CUDA device's) so that evaluating
    never changes the training run's random stream.  An episode that failed (env/tool error)
    counts as not solved and is counted in ``failed``."""
    with torch.random.fork_rng(devices=_cuda_devices()):
        torch.manual_seed(seed)
        trajectories = engine.run(specs, sampling=sampling)
    successes = sum(1 for trajectory in trajectories if trajectory.success)
    failed = sum(1 for trajectory in trajectories if trajectory.failure)
    cut_off = sum(1 for trajectory in trajectories if EpisodeStats.from_metadata(trajectory.metadata).cut_off)
    return EvalResult(label, proportion(successes, len(trajectories)),
                      mean([trajectory.total_reward for trajectory in trajectories]), len(trajectories), failed,
                      cut_off)


@contextlib.contextmanager
def _no_training_images(backend: PolicyBackend) -> Iterator[None]:
    """Evaluation trains nothing: the backend hands over no image tensors meanwhile."""
    backend.keep_images = False
    try:
        yield
    finally:
        backend.keep_images = True


class HeldOutEval:
    """Evaluates the policy behind ``backend`` on ``eval.seeds`` with the run's rollout settings,
    one episode per seed, at a given temperature; a context manager that closes its engine."""

    def __init__(self, backend: PolicyBackend, run: RunConfig) -> None:
        self.backend = backend
        self.run = run
        self.engine = RolloutEngine(backend, run.rollout, seed=run.seed)

    def __call__(self, label: str, temperature: float, env_id: str | None = None,
                 env_config: dict[str, Any] | None = None) -> EvalResult:
        """``env_id``/``env_config`` replace the run's env (e.g. the blank-images wrapper)."""
        run = self.run
        specs = episode_specs(env_id or run.env.id, run.eval.seeds.seeds(), 1,
                              env_config if env_id else run.env.config)
        sampling = SamplingParams(**{**run.rollout.sampling.model_dump(), "temperature": temperature}, n=1,
                                  seed=run.seed)
        with _no_training_images(self.backend):
            return evaluate(self.engine, specs, sampling, label, seed=run.seed)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> HeldOutEval:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

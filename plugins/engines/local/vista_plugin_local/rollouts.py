"""The local engine's two rollout paths over one in-memory policy: the training rollouts and the
held-out evaluation, both through the core ``RolloutEngine`` (the path ``vista eval`` takes), so
tools, reflection, context windows, timeouts and remote envs behave in training as in evaluation.

Built whole before a run starts and closed when it ends, so no stage has to ask whether they exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from vista_plugin_local.evaluate import HeldOutEval
from vista_plugin_local.policy import Policy
from vista_plugin_local.policy_backend import PolicyBackend
from vista_rl import SamplingParams, Trajectory
from vista_rl.config import RunConfig
from vista_rl.rollout import EpisodeSpec, RolloutEngine


@dataclass(frozen=True)
class TrainingRollouts:
    """The policy's backend, the engine its training episodes run on and its held-out evaluation;
    a context manager that closes both engines."""

    backend: PolicyBackend
    engine: RolloutEngine
    held_out: HeldOutEval

    @classmethod
    def open(cls, policy: Policy, run: RunConfig) -> TrainingRollouts:
        """Both paths with the run's rollout settings (closing the first if the second fails)."""
        backend = PolicyBackend(policy)
        engine = RolloutEngine(backend, run.rollout, seed=run.seed)
        try:
            held_out = HeldOutEval(backend, run)
        except BaseException:
            engine.close()
            raise
        return cls(backend, engine, held_out)

    def sample(self, episodes: list[EpisodeSpec], sampling: SamplingParams) -> list[Trajectory]:
        """Every episode's trajectory, in order, sampled with ``sampling`` (this call's alone: the
        engine keeps no sampling settings between calls)."""
        return self.engine.run(episodes, sampling=sampling)

    def close(self) -> None:
        """Both engines, the second even if closing the first raised."""
        try:
            self.engine.close()
        finally:
            self.held_out.close()

    def __enter__(self) -> TrainingRollouts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

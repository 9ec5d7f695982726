"""One RL step: rollout -> score -> advantages -> update, with the step's metrics.

The rollout goes through the core ``RolloutEngine`` (the path ``vista eval`` takes); the episodes
that failed (env, tool or model error) are written to ``failures.jsonl`` and left out of the update,
and the step goes on.  The step's seeds and the update's mini-batch order are functions of the run
seed and the step number, so a resumed run repeats them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from rich.console import Console

from vista_plugin_local.advantages import (
    build_advantage_batch,
    compute_advantages,
    make_estimator,
    per_turn_targets,
)
from vista_plugin_local.config import update_layout, validate_engine_config
from vista_plugin_local.metrics import append_jsonl
from vista_plugin_local.optim import Optimization
from vista_plugin_local.policy import Policy
from vista_plugin_local.ppo_update import (
    OldScores,
    PolicyUpdate,
    old_logprobs_are_update_logprobs,
    score_episodes,
)
from vista_plugin_local.rollouts import TrainingRollouts
from vista_plugin_local.samples import SampleBatch, TrainSample, training_samples
from vista_plugin_local.step_metrics import RolloutMetrics, StepMetrics
from vista_rl import SamplingParams, Trajectory
from vista_rl.config import RunConfig
from vista_rl.rollout import EpisodeStats, episode_specs
from vista_rl.step_seeds import step_seeds  # the rule every engine shares

#: Episodes left out of an update (env/tool/model failure), one JSON line each with the reason.
FAILURES_FILE = "failures.jsonl"


@dataclass
class StepResult:
    """What one step produced: its metrics (one ``metrics.jsonl`` line) and its training batch."""

    metrics: StepMetrics
    batch: SampleBatch


def step_sampling(run: RunConfig, step: int) -> SamplingParams:
    """How RL step ``step`` (0-based) samples: the run's sampling settings, one sample per episode
    spec (``group_size`` specs per seed), seeded by (run seed, step) so a resumed run repeats it."""
    return SamplingParams(**run.rollout.sampling.model_dump(), n=1, seed=run.seed + step)


class RLStep:
    """Runs RL steps of one policy with one optimizer; :meth:`__call__` is one step."""

    def __init__(self, run: RunConfig, policy: Policy, rollouts: TrainingRollouts, optimization: Optimization, *,
                 value_coef: float, run_dir: Path, console: Console) -> None:
        self.run = run
        self.policy = policy
        self.rollouts = rollouts
        self.optimization = optimization
        self.run_dir = run_dir
        self.console = console
        self.per_turn = run.rollout.per_turn_sequences
        algorithm = run.algorithm
        self.estimator = make_estimator(algorithm.estimator, algorithm.estimator_params)
        #: How the update scores its rows: shared prefixes, packed, or padded (engine_config.local).
        self.layout = update_layout(validate_engine_config(run))
        self.update = PolicyUpdate(policy, optimization, algorithm, value_coef=value_coef,
                                   micro_batch_size=run.trainer.micro_batch_size,
                                   max_grad_norm=run.trainer.max_grad_norm, layout=self.layout)

    def __call__(self, step: int, global_step: int, sampling: SamplingParams) -> StepResult:
        """RL step ``step`` (0-based) of the run, its episodes sampled with ``sampling``
        (:func:`step_sampling`); ``global_step`` (0-based) counts SFT steps too."""
        rollout, temperature = self.run.rollout, sampling.temperature
        started = time.perf_counter()
        specs = episode_specs(self.run.env.id, step_seeds(self.run, step), rollout.group_size, self.run.env.config)
        trajectories = self.rollouts.sample(specs, sampling)
        batch = training_samples(trajectories, self.rollouts.backend, self.per_turn)
        t_rollout = time.perf_counter() - started
        self._record_dropped(batch.dropped, step + 1)
        episodes = batch.samples
        generated = sum(EpisodeStats.from_metadata(t.metadata).generated_tokens for t in trajectories)
        done = rollout_metrics(trajectories, episodes)
        lr = self.optimization.lr  # the rate this step's update starts with
        if not episodes:
            self.console.print(f"[yellow]RL step {step + 1}: every episode failed; no update (see "
                               f"{FAILURES_FILE})[/yellow]")
            return StepResult({
                "stage": "rl", "step": step + 1, "global_step": global_step + 1, **done, "lr": lr,
                "time_rollout_s": t_rollout, "time_logprob_s": 0.0, "time_update_s": 0.0, "time_step_s": t_rollout,
                "gen_tokens_per_s": generated / max(t_rollout, 1e-9), "tokens_per_s": 0.0,
                "optimizer_steps": 0, "nan_skipped": False}, batch)

        started = time.perf_counter()
        reuse = old_logprobs_are_update_logprobs(self.run.algorithm, self.policy)
        old = OldScores() if reuse else score_episodes(
            self.policy, episodes, temperature, reference=self.run.algorithm.kl_coef > 0,
            micro_batch_size=self.run.trainer.micro_batch_size, layout=self.layout)
        t_logprob = time.perf_counter() - started

        started = time.perf_counter()
        advantages, returns = self._advantages(episodes, old)
        update = self.update(episodes, old, advantages, returns, temperature, shuffle_seed=self.run.seed * 31 + step)
        t_update = time.perf_counter() - started

        trained_tokens = sum(len(episode.tokens) for episode in episodes)
        total_time = t_rollout + t_logprob + t_update
        return StepResult({
            "stage": "rl", "step": step + 1, "global_step": global_step + 1, **done, "lr": lr,
            "response_tokens_mean": float(np.mean([episode.response_tokens for episode in episodes])),
            "sequence_tokens_mean": float(np.mean([len(episode.tokens) for episode in episodes])),
            "time_rollout_s": t_rollout, "time_logprob_s": t_logprob, "time_update_s": t_update,
            "time_step_s": total_time,
            "gen_tokens_per_s": generated / max(t_rollout, 1e-9),
            "tokens_per_s": (trained_tokens + generated) / max(total_time, 1e-9),
            **update,
        }, batch)

    def _advantages(self, episodes: list[TrainSample], old: OldScores) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(episode.tokens) for episode in episodes)
        if self.per_turn:  # a value head's values give GAE token-level credit over each episode's replies
            return per_turn_targets(self.estimator, episodes, width, self.run.algorithm.turn_credit, old.values)
        output = compute_advantages(self.estimator, build_advantage_batch(episodes, width, old.values))
        return output.advantages, output.returns

    def _record_dropped(self, dropped: list[tuple[Trajectory, str]], step: int) -> None:
        """Failed episodes are part of the record, not a reason to stop: one line each."""
        for trajectory, reason in dropped:
            append_jsonl(self.run_dir / FAILURES_FILE, {
                "stage": "rl", "step": step, "env_id": trajectory.env_id, "seed": trajectory.seed,
                "sample_index": trajectory.sample_index, "reason": reason,
                "stop_reason": EpisodeStats.from_metadata(trajectory.metadata).stop_reason,
                "turns": trajectory.num_turns})
        if dropped:
            self.console.print(f"[yellow]RL step {step}: {len(dropped)} episode(s) left out of "
                               f"the update ({dropped[0][1]}; all in {FAILURES_FILE})[/yellow]")


def rollout_metrics(trajectories: list[Trajectory], episodes: list[TrainSample]) -> RolloutMetrics:
    """What the rollout did: reward, success, turns, tool calls, errors, episodes cut off by a limit the
    env did not choose, and what went to training."""
    rewards = [trajectory.total_reward for trajectory in trajectories]
    stats = [EpisodeStats.from_metadata(trajectory.metadata) for trajectory in trajectories]
    return {
        "reward_mean": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
        "success_rate": float(np.mean([trajectory.success for trajectory in trajectories])),
        "turns_mean": float(np.mean([trajectory.num_turns for trajectory in trajectories])),
        "tool_calls_mean": float(np.mean([episode.tool_calls for episode in stats])),
        "env_errors": sum(1 for trajectory in trajectories if trajectory.failure),
        # ended by a limit the env did not choose (rollout.max_turns below its turn_limit(), a token budget)
        "cut_off_episodes": sum(1 for episode in stats if episode.cut_off),
        "trained_episodes": len({id(episode.trajectory) for episode in episodes}),
        "trained_sequences": len(episodes),
    }

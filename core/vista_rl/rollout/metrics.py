"""Run metrics with 95% confidence intervals, accumulated one trajectory at a time (only numbers are
kept, never trajectories, so a long eval's memory stays flat)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vista_rl._stats import Estimate, mean, proportion
from vista_rl.trajectory import Trajectory

#: What an env that takes several answers per episode (``answer_attempts``) says about the first.
FIRST_ATTEMPT_INFO_KEY = "first_attempt_correct"


@dataclass(frozen=True)
class FirstAttempt:
    """Whether the first attempt of an episode succeeded, and whether the env said so itself."""

    success: bool = False
    declared: bool = False


def first_attempt_verdict(info: Mapping[str, Any], success: bool, previous: FirstAttempt) -> FirstAttempt:
    """The first-attempt verdict after one env step of the engine's first attempt.

    Two kinds of retries exist: the engine's reflection (a reset; the first attempt ends with the
    first terminated step) and an env's own ``answer_attempts`` (one episode, several answers).  In
    the second the episode's ``success`` is that of the *last* answer, so only the env knows how the
    first went: its ``info["first_attempt_correct"]`` is the one source of truth whenever given, and
    the episode's success stands in only for envs that never say."""
    declared = info.get(FIRST_ATTEMPT_INFO_KEY)
    if isinstance(declared, bool):
        return FirstAttempt(success=declared, declared=True)
    if previous.declared:
        return previous
    return FirstAttempt(success=bool(success))


def first_attempt_success(trajectory: Trajectory) -> bool:
    """The episode's first-attempt verdict: as the engine recorded it, else what the env's step
    infos declared, else the episode's success (records written before the verdict existed)."""
    recorded = trajectory.metadata.get("first_attempt_success")
    if isinstance(recorded, bool):
        return recorded
    for turn in trajectory.turns:
        declared = (turn.info or {}).get(FIRST_ATTEMPT_INFO_KEY)
        if isinstance(declared, bool):
            return declared
    return bool(trajectory.success)


class RolloutMetrics:
    """Success rate, mean reward, format-error rate, mean turns and tokens, each with a 95% CI.

    The format-error rate is per env step (a step whose ``info["format_ok"]`` is False), Wilson
    interval; rates per episode use Wilson intervals, means a normal interval.  ``cut_off_rate`` is
    the share of episodes the engine ended by a limit the env did not choose (the trajectory's
    ``cut_off``, see :mod:`vista_rl.turn_limit`): a success rate with many of them measures the limit,
    not the policy.
    """

    def __init__(self) -> None:
        self.episodes = 0
        self.successes = 0
        self.first_attempt_successes = 0
        self.failures = 0
        self.env_steps = 0
        self.format_errors = 0
        self.rewards: list[float] = []
        self.turns: list[float] = []
        self.tokens: list[float] = []
        self.attempts: list[float] = []
        self.tool_calls = 0
        self.tokens_estimated = False
        self.stop_reasons: Counter[str] = Counter()
        self.cut_off: Counter[str] = Counter()
        self.failure_examples: list[str] = []

    def add(self, trajectory: Trajectory) -> None:
        meta = trajectory.metadata
        self.episodes += 1
        self.successes += int(trajectory.success)
        self.first_attempt_successes += int(first_attempt_success(trajectory))
        if trajectory.failure:
            self.failures += 1
            if len(self.failure_examples) < 5:
                self.failure_examples.append(trajectory.failure)
        self.env_steps += int(meta.get("env_steps", 0))
        self.format_errors += int(meta.get("format_errors", 0))
        self.rewards.append(trajectory.total_reward)
        self.turns.append(float(trajectory.num_turns))
        self.tokens.append(float(meta.get("generated_tokens", 0)))
        self.attempts.append(float(meta.get("attempts", 1)))
        self.tool_calls += int(meta.get("tool_calls", 0))
        self.tokens_estimated = self.tokens_estimated or bool(meta.get("tokens_estimated", False))
        self.stop_reasons[str(meta.get("stop_reason", ""))] += 1
        if meta.get("cut_off") is True:
            self.cut_off[str(meta.get("stop_reason", ""))] += 1

    @property
    def cut_off_episodes(self) -> int:
        """Episodes ended by a limit the env did not choose (records without the mark count as not)."""
        return sum(self.cut_off.values())

    def estimates(self) -> dict[str, Estimate]:
        return {
            "success_rate": proportion(self.successes, self.episodes),
            "mean_reward": mean(self.rewards),
            "format_error_rate": proportion(self.format_errors, self.env_steps),
            "mean_turns": mean(self.turns),
            "mean_tokens": mean(self.tokens),
            "failure_rate": proportion(self.failures, self.episodes),
            "first_attempt_success_rate": proportion(self.first_attempt_successes, self.episodes),
            "mean_attempts": mean(self.attempts),
            "cut_off_rate": proportion(self.cut_off_episodes, self.episodes),
        }

    def summary(self) -> dict[str, Any]:
        """JSON-ready: every estimate as value/ci95_low/ci95_high/n, plus counts."""
        data: dict[str, Any] = {name: est.to_dict() for name, est in self.estimates().items()}
        data.update(
            episodes=self.episodes, failures=self.failures, env_steps=self.env_steps,
            format_errors=self.format_errors, tool_calls=self.tool_calls,
            tokens_estimated=self.tokens_estimated, stop_reasons=dict(self.stop_reasons),
            cut_off_episodes=self.cut_off_episodes, cut_off_by=dict(self.cut_off),
            failure_examples=list(self.failure_examples),
        )
        return data

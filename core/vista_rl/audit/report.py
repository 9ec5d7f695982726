"""The audit's verdicts: which adversary found a hole, on which path and seed, and by how much.

A **hole** is an episode in which an adversary earned at least the oracle's reward on the same seed
and path without solving the task.  Solved means the env said so (``info["success"]`` on the last
step, ``Trajectory.success`` on the engine path), except for a *hedge* on an answer env: a reply
that names several answers did not solve the task even when the env accepted it (see
:mod:`vista_rl.audit.adversaries`).  Only seeds the oracle solved are judged: where the oracle
fails there is no bar to reach.

**Warnings** do not fail the audit: an env that accepted a hedge for less than the oracle's reward,
a solving adversary that earned more than the oracle (a bonus a policy can pad), and a right answer
after wrong ones that earned the oracle's full reward (retries the reward does not discount).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vista_rl.audit.adversaries import Adversary
from vista_rl.audit.episodes import Episode, PathName

#: Exit status of ``vista audit rewards``: no hole and every episode ran.
EXIT_OK = 0
#: Some adversary reached the oracle's reward without solving.
EXIT_HOLE = 1
#: No hole, but the audit is incomplete: episodes raised, or the oracle solved no seed.
EXIT_INCOMPLETE = 3


def reaches(reward: float, bar: float) -> bool:
    """``reward`` is at least ``bar``, up to float noise (a relative 1e-6)."""
    return reward >= bar - 1e-6 * max(1.0, abs(bar))


@dataclass
class Finding:
    """One hole or warning, with the episode that shows it."""

    kind: str
    adversary: str
    path: PathName
    seed: int
    reward: float
    oracle: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "adversary": self.adversary, "path": self.path, "seed": self.seed,
                "reward": self.reward, "oracle_reward": self.oracle, "message": self.message}


@dataclass
class Row:
    """One adversary on one path over every seed."""

    adversary: str
    path: PathName
    episodes: list[Episode]
    solved: int
    holes: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        return [episode.reward for episode in self.episodes if episode.error is None]

    @property
    def max_reward(self) -> float | None:
        return max(self.rewards) if self.rewards else None

    @property
    def mean_reward(self) -> float | None:
        return sum(self.rewards) / len(self.rewards) if self.rewards else None

    @property
    def errors(self) -> list[Episode]:
        return [episode for episode in self.episodes if episode.error is not None]

    @property
    def verdict(self) -> str:
        if self.holes:
            return "HOLE"
        if self.errors:
            return "error"
        return "warn" if self.warnings else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"adversary": self.adversary, "path": self.path, "verdict": self.verdict,
                "max_reward": self.max_reward, "mean_reward": self.mean_reward, "solved": self.solved,
                "episodes": [episode.to_dict() for episode in self.episodes],
                "holes": [f.to_dict() for f in self.holes], "warnings": [f.to_dict() for f in self.warnings]}


def judge_row(adversary: Adversary, path: PathName, episodes: Sequence[Episode], oracle: Mapping[int, Episode],
              hedge_seeds: Mapping[int, bool]) -> Row:
    """The row of ``adversary`` on ``path``: its solves, holes and warnings against ``oracle`` (the
    oracle's episode per seed on the same path).  ``hedge_seeds[seed]`` says whether a hedge is one
    on that seed: the env judges answers (not moves) and a wrong answer of the same kind was found
    to hide the right one among (:attr:`SeedTask.plausible_decoys`)."""
    solved = 0
    row = Row(adversary.name, path, list(episodes), 0)
    for episode in episodes:
        hedge = adversary.hedges and hedge_seeds.get(episode.seed, False)
        solves = episode.error is None and episode.success and not hedge
        solved += solves
        bar = oracle.get(episode.seed)
        if episode.error is not None or bar is None or bar.error is not None or not bar.success:
            continue

        def finding(kind: str, message: str, episode: Episode = episode, bar: Episode = bar) -> Finding:
            return Finding(kind, adversary.name, path, episode.seed, episode.reward, bar.reward, message)

        if not solves and reaches(episode.reward, bar.reward):
            what = "with a hedged answer the env accepted" if hedge and episode.success else "without solving"
            row.holes.append(finding("hole", f"earned {episode.reward:.3f} {what}; the oracle earned "
                                             f"{bar.reward:.3f}"))
        elif hedge and episode.success:
            row.warnings.append(finding("hedge_accepted", f"the env accepted a hedged answer (reward "
                                                          f"{episode.reward:.3f}, oracle {bar.reward:.3f})"))
        elif solves and adversary.answers_right and episode.reward > bar.reward + 1e-6 * max(1.0, abs(bar.reward)):
            row.warnings.append(finding("above_oracle", f"solved and earned {episode.reward:.3f}, more than "
                                                        f"the oracle's {bar.reward:.3f}"))
        elif solves and adversary.family == "retries" and adversary.answers_right and reaches(episode.reward,
                                                                                                bar.reward):
            row.warnings.append(finding("late_answer_full_reward", f"a right answer after wrong ones earned "
                                                                   f"{episode.reward:.3f}, as much as the oracle"))
    row.solved = solved
    return row


@dataclass
class AuditReport:
    """Everything one audit found about one env."""

    env_id: str
    env_config: dict[str, Any]
    seeds: list[int]
    paths: list[PathName]
    oracle: dict[PathName, dict[int, Episode]]
    rows: list[Row]
    max_turns: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def holes(self) -> list[Finding]:
        return [finding for row in self.rows for finding in row.holes]

    @property
    def warnings(self) -> list[Finding]:
        return [finding for row in self.rows for finding in row.warnings]

    @property
    def errors(self) -> list[Episode]:
        oracle_errors = [episode for runs in self.oracle.values() for episode in runs.values() if episode.error]
        return oracle_errors + [episode for row in self.rows for episode in row.errors]

    def judged_seeds(self, path: PathName) -> list[int]:
        """Seeds whose oracle solved the task on ``path``: the only ones a hole can be found on."""
        return [seed for seed, episode in self.oracle.get(path, {}).items() if episode.success and not episode.error]

    @property
    def exit_code(self) -> int:
        if self.holes:
            return EXIT_HOLE
        if self.errors or not all(self.judged_seeds(path) for path in self.paths):
            return EXIT_INCOMPLETE
        return EXIT_OK

    def oracle_mean(self, path: PathName) -> float | None:
        runs = [episode.reward for episode in self.oracle.get(path, {}).values() if episode.error is None]
        return sum(runs) / len(runs) if runs else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env_id, "env_config": self.env_config, "seeds": self.seeds, "paths": self.paths,
            "max_turns": self.max_turns,
            "exit_code": self.exit_code, "holes": [finding.to_dict() for finding in self.holes],
            "warnings": [finding.to_dict() for finding in self.warnings],
            "oracle": {path: {"mean_reward": self.oracle_mean(path), "judged_seeds": self.judged_seeds(path),
                              "episodes": [episode.to_dict() for episode in runs.values()]}
                       for path, runs in self.oracle.items()},
            "adversaries": [row.to_dict() for row in self.rows],
            "notes": self.notes, "skipped": self.skipped,
        }

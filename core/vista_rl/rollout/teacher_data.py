"""The episodes an SFT stage learns from when ``sft.source`` is ``oracle``, the same on every engine.

Why one helper: the local and verl engines both play the env's oracle (or its configured flawed
teacher, issue 38) on ``sft.seeds`` and keep some of its episodes; which ones they keep decides what
SFT can learn, so it must not differ between engines.  By default only successful episodes are kept
(rejection sampling: with the exact oracle every episode succeeds).  ``sft.keep_failed`` keeps the
failed ones too, which is plain behaviour cloning: with a teacher whose error does not depend on
what it sees (``coin_walk``), dropping its failures would teach SFT part of what the teacher does
not know, because only the lucky choices would survive.
"""

from __future__ import annotations

from dataclasses import dataclass

import vista_rl
from vista_rl.config import RunConfig
from vista_rl.errors import ConfigError
from vista_rl.rollout.engine import RolloutEngine, episode_specs
from vista_rl.trajectory import Trajectory


@dataclass(frozen=True)
class TeacherEpisodes:
    """The teacher's episodes an SFT stage learns from, and how many were played."""

    kept: list[Trajectory]
    played: int
    succeeded: int
    errored: int

    def summary(self) -> str:
        """One line for the console: what was kept out of what."""
        kept = f"{len(self.kept)} oracle trajectories" + (
            f" ({self.succeeded} succeeded, failed ones kept: sft.keep_failed)" if len(self.kept) != self.succeeded
            else " that succeeded")
        errors = f"; {self.errored} failed with errors" if self.errored else ""
        return f"SFT data: {kept} (of {self.played} seeds{errors})"


def teacher_episodes(run: RunConfig) -> TeacherEpisodes:
    """Play the env's scripted oracle on ``sft.seeds`` through the rollout engine (so SFT sees the
    prompts RL sees) and keep its successful episodes, or every episode that ran without an error
    when ``sft.keep_failed`` is set.  Raises :class:`ConfigError` when nothing is left to learn from."""
    oracle = vista_rl.make_model("scripted", path="oracle")
    with RolloutEngine(oracle, run.rollout, seed=run.seed) as engine:
        trajectories = engine.run(episode_specs(run.env.id, run.sft.seeds.seeds(), 1, run.env.config))
    clean = [trajectory for trajectory in trajectories if not trajectory.failure]
    succeeded = [trajectory for trajectory in clean if trajectory.success]
    kept = clean if run.sft.keep_failed else succeeded
    if not succeeded:
        raise ConfigError(f"sft.seeds: the oracle of {run.env.id} solved none of the SFT seeds; check the env's "
                          "oracle_response()")
    return TeacherEpisodes(kept=kept, played=len(trajectories), succeeded=len(succeeded),
                           errored=len(trajectories) - len(clean))

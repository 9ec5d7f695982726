"""Baselines that say whether a trained agent uses what it sees, and the main job's pass/fail rule.

A success rate means little alone: on FrozenLake with a fixed start and goal, one fixed action
sequence that never looks at the map solves 0.425 of the maps, more than the first trained agent did.
So every report of a visual agent needs, beside it:

* the best *blind* baseline: the best fixed action sequence, chosen on training seeds and scored on
  the held-out seeds (:func:`best_blind_baseline`), played through the core ``RolloutEngine`` with the
  scripted backend, so it runs on any registered env exactly as a model would;
* the random policy (:func:`random_baseline`): a uniformly random declared action each turn
  (``scripted:random``), the floor any policy that acts should clear;
* the agent with its images blanked (:class:`BlankImagesEnv`, registered as ``vista/blank-images``):
  same env, same text, every image replaced by a blank one of the same size; if success barely moves,
  the agent is not reading the image;
* the verdict (:func:`main_job_verdict`): RL must beat SFT and the blind baseline beyond both 95%
  CIs, and blanking must cost it at least ``min_blanking_drop`` success.

Nothing here depends on an engine: any engine that can evaluate on an env id can use the wrapper, and
the blind search needs only the env.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

import vista_rl
from vista_rl._stats import Estimate, proportion
from vista_rl.backends.scripted import ScriptedBackend
from vista_rl.config import RolloutSection
from vista_rl.env import DEFAULT_ACTION_REPLY, EnvWrapper, StepResult, declared_actions
from vista_rl.observation import Observation
from vista_rl.rollout.engine import RolloutEngine, episode_specs
from vista_rl.rollout.stats import EpisodeStats

BLANK_ENV_ID = "vista/blank-images"
DEFAULT_ACTION_FORMAT = DEFAULT_ACTION_REPLY
#: Called after each candidate prefix is scored: (prefixes scored so far, upper estimate of the total).
ProgressHook = Callable[[int, int], None]


# ------------------------------------------------------------------------------------ image blanking
def blank_image(image: Image.Image, colour: tuple[int, int, int] = (0, 0, 0)) -> Image.Image:
    """A blank image of the same size and mode (the colour is taken as grey for one-band modes)."""
    fill: Any = colour if len(image.getbands()) >= 3 else round(sum(colour) / 3)
    if image.mode in ("RGBA", "LA"):
        fill = (*colour, 255) if image.mode == "RGBA" else (fill, 255)
    return Image.new(image.mode, image.size, fill)


def blank_observation(observation: Observation, colour: tuple[int, int, int] = (0, 0, 0)) -> Observation:
    """The same text, every image blanked (placeholders stay, so the model sees the same layout)."""
    return Observation(observation.text, [blank_image(image, colour) for image in observation.images])


class BlankImagesEnv(EnvWrapper):
    """Wraps any registered env and blanks every image it shows; text, rewards, info, tools and the
    oracle are the inner env's.  ``vista.make_env("vista/blank-images", env=ID, config={...})``."""

    def __init__(self, env: str, config: Mapping[str, Any] | None = None,
                 colour: tuple[int, int, int] = (0, 0, 0)) -> None:
        super().__init__(vista_rl.make_env(env, **dict(config or {})))
        self.colour = tuple(colour)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        observation, info = self.inner.reset(seed=seed)
        return blank_observation(observation, self.colour), info  # type: ignore[arg-type]

    def step(self, action: str) -> StepResult:
        result = self.inner.step(action)
        result.observation = blank_observation(result.observation, self.colour)  # type: ignore[arg-type]
        return result

    def tool_context_metadata(self) -> dict[str, Any]:
        return {}  # full-resolution originals would let a tool see what the model must not


# ------------------------------------------------------------------------------------- blind search
@dataclass(frozen=True)
class SequenceScore:
    """What one fixed action sequence did on a set of seeds."""

    actions: tuple[str, ...]
    successes: int
    seeds: int
    live: int = 0  # episodes not over after the whole sequence (only for prefixes)

    @property
    def estimate(self) -> Estimate:
        return proportion(self.successes, self.seeds)


@dataclass
class BlindBaseline:
    """The best fixed response sequence: chosen on ``train``, scored on ``heldout``."""

    actions: tuple[str, ...]
    train: Estimate
    heldout: Estimate | None
    candidates_scored: int
    exhaustive: bool
    runner_up: list[SequenceScore] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"actions": list(self.actions), "train_success": self.train.to_dict(),
                "success": self.heldout.to_dict() if self.heldout is not None else None,
                "candidates_scored": self.candidates_scored, "exhaustive": self.exhaustive,
                "runner_up": [{"actions": list(s.actions), "train_success": s.successes / max(s.seeds, 1)}
                              for s in self.runner_up]}


def play_sequence(env_id: str, env_config: Mapping[str, Any], actions: Sequence[str], seeds: Sequence[int],
                  *, action_format: str = DEFAULT_ACTION_FORMAT, batch_size: int = 64) -> tuple[list[bool], list[bool]]:
    """Play ``actions`` (one per turn, whatever the env shows) on every seed through the core
    ``RolloutEngine``.  Returns (success, still running after the last action) per seed."""
    if not actions:
        raise ValueError("a blind sequence needs at least one action")
    backend = ScriptedBackend(responses=[action_format.format(action) for action in actions], per_turn=True)
    settings = RolloutSection(max_turns=len(actions), batch_size=batch_size)
    with RolloutEngine(backend, settings) as engine:
        trajectories = engine.run(episode_specs(env_id, seeds, 1, env_config))
    success = [bool(t.success) for t in trajectories]
    # "max_turns" is the engine's stop reason only when the env had not ended the episode itself.
    live = [not t.success and not t.failure and EpisodeStats.from_metadata(t.metadata).stop_reason == "max_turns"
            for t in trajectories]
    return success, live


def oracle_plans(env_id: str, env_config: Mapping[str, Any], length: int, seeds: Sequence[int], *,
                 batch_size: int = 64) -> list[tuple[str, ...]]:
    """The oracle's responses on each seed (up to ``length`` turns), played through the core
    ``RolloutEngine`` with the scripted oracle backend; shorter plans repeat their last response."""
    settings = RolloutSection(max_turns=length, batch_size=batch_size)
    with RolloutEngine(ScriptedBackend("oracle"), settings) as engine:
        trajectories = engine.run(episode_specs(env_id, seeds, 1, env_config))
    plans = []
    for trajectory in trajectories:
        responses = [turn.response for turn in trajectory.turns if turn.response]
        if responses:
            plans.append(tuple(responses + [responses[-1]] * (length - len(responses))))
    return plans


def search_blind_sequences(env_id: str, env_config: Mapping[str, Any], actions: Sequence[str], length: int,
                           seeds: Sequence[int], *, max_candidates: int = 64, action_format: str = DEFAULT_ACTION_FORMAT,
                           batch_size: int = 64, progress: ProgressHook | None = None) -> tuple[list[SequenceScore], bool]:
    """Fixed sequences of ``length`` responses ranked by successes on ``seeds`` (best first).

    Exhaustive when ``len(actions) ** length <= max_candidates``.  Otherwise (4 actions and 6 turns
    give 4,096 sequences, each a full rollout on every seed) the search is pruned to the sequences
    that can plausibly be best: a fixed sequence succeeds on a seed only if it is a solution there, so
    the candidates are the distinct oracle plans of the training seeds, most frequent first, then
    hill climbing from the best by single-action substitutions until no substitution helps or the
    ``max_candidates`` budget is spent.  Returns (ranked sequences, exhaustive).
    """
    if length < 1 or not actions or not seeds:
        raise ValueError("need at least one action, one seed and length >= 1")
    responses = [action_format.format(action) for action in actions]
    scores: dict[tuple[str, ...], SequenceScore] = {}

    def score(sequence: tuple[str, ...]) -> SequenceScore:
        if sequence not in scores:
            won, live = play_sequence(env_id, env_config, sequence, seeds, action_format="{}", batch_size=batch_size)
            scores[sequence] = SequenceScore(sequence, sum(won), len(seeds), sum(live))
            if progress is not None:
                progress(len(scores), max_candidates)
        return scores[sequence]

    exhaustive = len(responses) ** length <= max_candidates
    if exhaustive:
        for sequence in itertools.product(responses, repeat=length):
            score(sequence)
    else:
        plans = oracle_plans(env_id, env_config, length, seeds, batch_size=batch_size)
        frequent = [plan for plan, _count in Counter(plans).most_common()]
        for plan in frequent[: max(1, max_candidates // 2)]:
            score(plan)
        best = max(scores.values(), key=lambda item: item.successes)
        improved = True
        while improved and len(scores) < max_candidates:
            improved = False
            for position in range(length):
                for response in responses:
                    if len(scores) >= max_candidates:
                        break
                    neighbour = (*best.actions[:position], response, *best.actions[position + 1:])
                    candidate = score(neighbour)
                    if candidate.successes > best.successes:
                        best, improved = candidate, True
    ranked = sorted(scores.values(), key=lambda item: item.successes, reverse=True)
    return ranked, exhaustive


def best_blind_baseline(env_id: str, env_config: Mapping[str, Any], actions: Sequence[str], length: int,
                        train_seeds: Sequence[int], heldout_seeds: Sequence[int] | None = None, *,
                        max_candidates: int = 64, action_format: str = DEFAULT_ACTION_FORMAT, batch_size: int = 64,
                        progress: ProgressHook | None = None) -> BlindBaseline:
    """Choose the best fixed sequence on ``train_seeds`` (never on held-out ones) and score it on
    ``heldout_seeds`` with a Wilson 95% CI."""
    overlap = set(train_seeds) & set(heldout_seeds or ())
    if overlap:
        raise ValueError(f"train and held-out seeds overlap ({len(overlap)} seeds): the baseline would be "
                         "chosen on the seeds it is scored on")
    ranked, exhaustive = search_blind_sequences(env_id, env_config, actions, length, train_seeds,
                                                max_candidates=max_candidates, action_format=action_format,
                                                batch_size=batch_size, progress=progress)
    best = ranked[0]
    heldout = None
    if heldout_seeds:
        won, _ = play_sequence(env_id, env_config, best.actions, heldout_seeds, action_format="{}",
                               batch_size=batch_size)
        heldout = proportion(sum(won), len(won))
    return BlindBaseline(best.actions, best.estimate, heldout, len(ranked), exhaustive, ranked[1:5])


def random_baseline(env_id: str, env_config: Mapping[str, Any], seeds: Sequence[int], max_turns: int, *,
                    seed: int = 0, batch_size: int = 64) -> Estimate:
    """Success (Wilson 95% CI) of a uniformly random declared action each turn (``scripted:random``,
    phrased in the env's reply format) on ``seeds``, through the core ``RolloutEngine``; ``seed`` is
    the run seed the draws depend on, so the number is reproducible."""
    env = vista_rl.make_env(env_id, **dict(env_config))
    try:
        if not declared_actions(env):
            raise ValueError(f"{env_id} declares no actions (action_names): a random policy has nothing to choose")
    finally:
        env.close()
    settings = RolloutSection(max_turns=max_turns, batch_size=batch_size)
    with RolloutEngine(ScriptedBackend("random"), settings, seed=seed) as engine:
        trajectories = engine.run(episode_specs(env_id, seeds, 1, env_config))
    return proportion(sum(1 for t in trajectories if t.success), len(trajectories))


def bare_action(response: str, action_format: str = DEFAULT_ACTION_FORMAT) -> str:
    """The action inside a formatted response (``<answer>Down</answer>`` -> ``Down``), for tables."""
    prefix, _, suffix = action_format.partition("{}")
    return response.removeprefix(prefix).removesuffix(suffix)


def all_sequences(actions: Sequence[str], length: int) -> list[tuple[str, ...]]:
    """Every sequence of ``length`` actions (for tests and small brute-force checks)."""
    return list(itertools.product(actions, repeat=length))


# ----------------------------------------------------------------------------------------- verdict
@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Verdict:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def line(self) -> str:
        failed = [check.name for check in self.checks if not check.passed]
        if not failed:
            return "VERDICT: PASS (" + "; ".join(check.detail for check in self.checks) + ")"
        return "VERDICT: FAIL (" + "; ".join(check.detail for check in self.checks if not check.passed) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "line": self.line(),
                "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks]}


def beats(a: Estimate, b: Estimate) -> bool:
    """``a`` beats ``b`` beyond both 95% CIs: a's lower bound above b's upper bound."""
    return a.low > b.high


def main_job_verdict(rl: Estimate, sft: Estimate, blind: Estimate, rl_blanked: Estimate,
                     min_blanking_drop: float = 0.2) -> Verdict:
    """The main job passes only if the trained agent is better than its warm start and than any
    blind policy beyond the CIs, and needs its images (blanking costs >= ``min_blanking_drop``)."""
    drop = rl.value - rl_blanked.value
    return Verdict((
        Check("rl_beats_sft", beats(rl, sft),
              f"RL {rl} {'>' if beats(rl, sft) else 'does not beat'} SFT {sft} beyond both CIs"),
        Check("rl_beats_blind", beats(rl, blind),
              f"RL {rl} {'>' if beats(rl, blind) else 'does not beat'} best blind sequence {blind} beyond both CIs"),
        Check("images_matter", drop >= min_blanking_drop - 1e-9,  # 0.7 - 0.5 is 0.19999999999999996
              f"blanking the images costs RL {drop:+.3f} success (needs >= {min_blanking_drop:.2f})"),
    ))

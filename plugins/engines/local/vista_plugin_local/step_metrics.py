"""The typed records of one training step: what a step reports and what the trainer reads back.

Each record is a ``TypedDict``: at run time a plain dict, so it goes to ``metrics.jsonl`` and to
every logger unchanged, in the order its keys were written; to the type checker a record whose keys
and value types are known, so a mistyped or renamed key fails ``mypy`` instead of a run.
"""

# No ``from __future__ import annotations`` here: ``TypedDict`` reads ``NotRequired`` from evaluated
# annotations only (on Python 3.11 a string annotation would make every key required at run time).
from typing import Literal, NotRequired, TypedDict


class RolloutMetrics(TypedDict):
    """What an RL step's rollout did (:func:`vista_plugin_local.rl_step.rollout_metrics`)."""

    reward_mean: float
    reward_std: float
    success_rate: float
    turns_mean: float
    tool_calls_mean: float
    env_errors: int
    #: ended by a limit the env did not choose (``rollout.max_turns`` below its ``turn_limit()``, a budget)
    cut_off_episodes: int
    trained_episodes: int
    trained_sequences: int


class UpdateMetrics(TypedDict):
    """The losses of a policy update, averaged over its optimizer steps
    (:class:`vista_plugin_local.ppo_update.PolicyUpdate`)."""

    loss: float
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    #: only with a value head (PPO with a critic)
    value_loss: NotRequired[float]
    grad_norm: float
    #: some optimizer step's loss or gradient was not finite and was dropped
    nan_skipped: bool
    optimizer_steps: int
    advantage_mean: float


class StepMetrics(TypedDict):
    """One RL step's line of ``metrics.jsonl``: its rollout, timings and update.  A step whose every
    episode failed has no update: it carries ``optimizer_steps=0`` and ``nan_skipped=False`` only.
    The rollout's keys are written out again, not inherited from :class:`RolloutMetrics`: the order
    here is the order of the line's keys (tested), and inherited keys would come first."""

    stage: Literal["rl"]
    step: int
    global_step: int
    reward_mean: float
    reward_std: float
    success_rate: float
    turns_mean: float
    tool_calls_mean: float
    env_errors: int
    cut_off_episodes: int
    trained_episodes: int
    trained_sequences: int
    lr: float
    response_tokens_mean: NotRequired[float]
    sequence_tokens_mean: NotRequired[float]
    time_rollout_s: float
    time_logprob_s: float
    time_update_s: float
    time_step_s: float
    gen_tokens_per_s: float
    tokens_per_s: float
    loss: NotRequired[float]
    pg_loss: NotRequired[float]
    kl: NotRequired[float]
    entropy: NotRequired[float]
    clip_fraction: NotRequired[float]
    value_loss: NotRequired[float]
    grad_norm: NotRequired[float]
    nan_skipped: bool
    optimizer_steps: int
    advantage_mean: NotRequired[float]


class SftUpdateMetrics(TypedDict):
    """One SFT optimizer step (:func:`vista_plugin_local.sft_stage.sft_update`)."""

    loss: float
    grad_norm: float
    #: trainable (loss-masked) tokens in the batch
    tokens: float
    nan_skipped: bool


class SftStepMetrics(SftUpdateMetrics):
    """One SFT step's line of ``metrics.jsonl``: the update, then where and when it ran."""

    stage: Literal["sft"]
    step: int
    global_step: int
    lr: float
    seconds: float

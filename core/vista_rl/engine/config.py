"""The ``local`` engine's own config sections, validated from ``RunConfig.engine_config``.

They live here rather than in :mod:`vista_rl.config` because they belong to one engine; the core's
``RunConfig`` stays engine-neutral.  Errors name the full key (``engine_config.trainer.lr: ...``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from vista_rl.config import RunConfig, Section, validate_config

#: Estimators that need a critic: choosing one turns on the value head (PPO).
VALUE_ESTIMATORS = frozenset({"gae", "masked_gae", "bilevel_gae", "turnwise_gae"})


class SeedRange(Section):
    """``count`` consecutive env seeds from ``start``: train and held-out ranges must not overlap."""

    start: int = Field(0, ge=0)
    count: int = Field(64, ge=1)

    def seeds(self) -> list[int]:
        return list(range(self.start, self.start + self.count))

    def overlaps(self, other: SeedRange) -> bool:
        return self.start < other.start + other.count and other.start < self.start + self.count


class AlgorithmSection(Section):
    """The RL objective.  ``estimator`` is any registered advantage-estimator id."""

    estimator: str = "grpo"
    estimator_params: dict[str, Any] = Field(default_factory=dict)
    clip_ratio_low: float = Field(0.2, ge=0.0)
    clip_ratio_high: float = Field(0.2, ge=0.0)
    kl_coef: float = Field(0.0, ge=0.0, description="KL to the frozen reference model (0: no reference)")
    entropy_coef: float = Field(0.0)
    loss_agg: Literal["token-mean", "seq-mean"] = "token-mean"
    value_coef: float = Field(0.5, ge=0.0)
    value_clip: float | None = Field(0.2, gt=0.0)
    ppo_epochs: int = Field(1, ge=1)
    mini_batches: int = Field(1, ge=1, description="optimizer steps per epoch over one rollout batch")
    value_head: bool | None = Field(None, description="default: on for the GAE family")

    @property
    def uses_value_head(self) -> bool:
        return self.value_head if self.value_head is not None else self.estimator in VALUE_ESTIMATORS


class TrainerSection(Section):
    steps: int = Field(20, ge=0, description="RL steps (0: no RL stage)")
    seeds_per_step: int = Field(8, ge=1, description="envs per step (B); each is sampled G times")
    train_seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=0, count=1000))
    lr: float = Field(1e-4, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    warmup_steps: int = Field(0, ge=0)
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    micro_batch_size: int = Field(16, ge=1, description="sequences per forward; gradients accumulate")
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    checkpoint_every: int = Field(0, ge=0, description="steps between checkpoints (0: only at the end)")
    eval_every: int = Field(0, ge=0, description="RL steps between held-out evals (0: only at the end)")
    max_nan_steps: int = Field(3, ge=1, description="stop after this many skipped non-finite steps")
    image_size: int | None = Field(None, ge=28, description="resize observation images to this square size")
    keep_checkpoints: int = Field(2, ge=1)


class SftSection(Section):
    """Supervised warm start on oracle rollouts (``source: oracle``) or a trajectory JSONL."""

    steps: int = Field(0, ge=0, description="optimizer steps (0: no SFT stage)")
    source: Literal["oracle", "jsonl"] = "oracle"
    path: str | None = None
    seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=50_000, count=64))
    batch_size: int = Field(8, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    max_grad_norm: float | None = Field(1.0, gt=0.0)

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> SftSection:
        if self.source == "jsonl" and not self.path:
            raise ValueError("sft.source is 'jsonl' but sft.path is not set")
        return self


class EvalSection(Section):
    seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=100_000, count=100))
    temperature: float = Field(0.0, ge=0.0, description="0: greedy")
    at_start: bool = True
    after_sft: bool = True
    batch_size: int = Field(64, ge=1)


class LoraSection(Section):
    enabled: bool = False
    r: int = Field(8, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class LocalEngineConfig(Section):
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    trainer: TrainerSection = Field(default_factory=TrainerSection)
    sft: SftSection = Field(default_factory=SftSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    lora: LoraSection = Field(default_factory=LoraSection)

    @model_validator(mode="after")
    def _disjoint_seeds(self) -> LocalEngineConfig:
        if self.trainer.steps and self.trainer.train_seeds.overlaps(self.eval.seeds):
            raise ValueError("trainer.train_seeds overlaps eval.seeds: held-out seeds must not be trained on")
        if self.sft.steps and self.sft.source == "oracle" and self.sft.seeds.overlaps(self.eval.seeds):
            raise ValueError("sft.seeds overlaps eval.seeds: held-out seeds must not be trained on")
        return self


class _Wrapper(Section):
    engine_config: LocalEngineConfig


def validate_engine_config(run: RunConfig) -> LocalEngineConfig:
    """Validate ``run.engine_config``; errors name the full key (``engine_config.trainer.lr``)."""
    return validate_config(_Wrapper, {"engine_config": run.engine_config}, "run config").engine_config

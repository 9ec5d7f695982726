"""The ``local`` engine's config: the engine-neutral sections of the run config plus its own section.

A user writes the shared settings (``algorithm``, ``trainer``, ``sft``, ``eval``, ``rollout``) once,
engine-neutral, in :class:`vista_rl.config.RunConfig`; only what this engine alone has lives under
``engine_config.local`` (:class:`LocalSection`: device, precision, LoRA, ...).  The trainer reads one
merged view, :class:`LocalEngineConfig`, whose sections keep the names the trainer has always used
(``config.algorithm.clip_ratio_low``, ``config.trainer.device``, ``config.eval.batch_size``).
Errors name the full key (``engine_config.local.precision: ...``, ``trainer.lr: ...``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vista_rl import config as run_sections
from vista_rl.config import VALUE_ESTIMATORS, RunConfig, Section, SeedRange, SftSection, engine_section

ENGINE_ID = "local"

__all__ = ["ENGINE_ID", "VALUE_ESTIMATORS", "AlgorithmSection", "EvalSection", "LocalEngineConfig", "LocalSection",
           "LoraSection", "SeedRange", "SftSection", "TrainerSection", "validate_engine_config"]


class LoraSection(Section):
    enabled: bool = False
    r: int = Field(8, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class LocalSection(Section):
    """``engine_config.local``: what only the one-process engine has."""

    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    image_size: int | None = Field(None, ge=28, description="resize observation images to this square size")
    max_nan_steps: int = Field(3, ge=1, description="stop after this many skipped non-finite steps")
    value_coef: float = Field(0.5, ge=0.0, description="weight of the value-head loss (it shares the policy's body)")
    lora: LoraSection = Field(default_factory=LoraSection)


class AlgorithmSection(run_sections.AlgorithmSection):
    """The neutral ``algorithm`` plus the value-head weight of ``engine_config.local``."""

    value_coef: float = Field(0.5, ge=0.0)

    @property
    def value_head(self) -> bool | None:
        return self.critic

    @property
    def uses_value_head(self) -> bool:
        return self.uses_critic


class TrainerSection(run_sections.TrainerSection):
    """The neutral ``trainer`` plus the device settings of ``engine_config.local``."""

    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    max_nan_steps: int = Field(3, ge=1)
    image_size: int | None = Field(None, ge=28)


class EvalSection(run_sections.EvalSection):
    """The neutral ``eval`` plus ``batch_size``, taken from ``rollout.batch_size``."""

    batch_size: int = Field(64, ge=1)


class LocalEngineConfig(Section):
    """What the local trainer reads: neutral sections merged with ``engine_config.local``."""

    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    trainer: TrainerSection = Field(default_factory=TrainerSection)
    sft: SftSection = Field(default_factory=SftSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    lora: LoraSection = Field(default_factory=LoraSection)


def validate_engine_config(run: RunConfig) -> LocalEngineConfig:
    """The local engine's merged view of ``run``; errors name the full key (``engine_config.local.lora.r``)."""
    own = engine_section(run, ENGINE_ID, LocalSection)
    algorithm: dict[str, Any] = {**run.algorithm.model_dump(), "value_coef": own.value_coef}
    trainer: dict[str, Any] = {**run.trainer.model_dump(), "precision": own.precision, "device": own.device,
                               "max_nan_steps": own.max_nan_steps, "image_size": own.image_size}
    evaluation: dict[str, Any] = {**run.eval.model_dump(), "batch_size": run.rollout.batch_size}
    return LocalEngineConfig(algorithm=AlgorithmSection.model_validate(algorithm),
                             trainer=TrainerSection.model_validate(trainer), sft=run.sft,
                             eval=EvalSection.model_validate(evaluation), lora=own.lora)

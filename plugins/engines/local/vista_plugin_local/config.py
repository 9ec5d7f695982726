"""The ``local`` engine's config: the engine-neutral sections of the run config plus its own section.

A user writes the shared settings (``algorithm``, ``trainer``, ``sft``, ``eval``, ``rollout``) once,
engine-neutral, in :class:`vista_rl.config.RunConfig`; only what this engine alone has lives under
``engine_config.local`` (:class:`LocalSection`: device, precision, LoRA, ...), declared here once.
The trainer reads :class:`LocalEngineConfig`: the neutral sections as they are, and ``local``.
Errors name the full key (``engine_config.local.precision: ...``, ``trainer.lr: ...``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import vista_rl
from vista_plugin_local import verl_section
from vista_rl.config import (
    AlgorithmSection,
    EvalSection,
    RunConfig,
    Section,
    SftSection,
    TrainerSection,
    engine_section,
)

ENGINE_ID = "local"

#: How the update lays out a micro-batch's rows (:mod:`vista_plugin_local.packed_forward`).
Layout = Literal["shared_prefix", "packed", "padded"]

__all__ = ["ENGINE_ID", "Layout", "LocalEngineConfig", "LocalSection", "LoraSection", "update_layout", "validate_engine_config"]


class LoraSection(Section):
    """``engine_config.local.lora``: train low-rank adapters instead of every weight (peft)."""

    enabled: bool = Field(False, description="train LoRA adapters; the saved models have them merged")
    r: int = Field(8, ge=1, description="rank of each adapter")
    alpha: int = Field(16, ge=1, description="LoRA scaling numerator (the update is scaled by alpha / r)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the adapters' input")
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
                                      description="names of the linear layers that get adapters")


class LocalSection(Section):
    """``engine_config.local``: what only the one-process engine has."""

    device: str = Field("auto", description="auto | cpu | cuda | cuda:N (auto: cuda when available)")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="autocast dtype; auto: bf16 on a GPU that supports it, else fp32")
    image_size: int | None = Field(None, ge=28, description="resize observation images to this square size")
    max_nan_steps: int = Field(3, ge=1, description="stop after this many skipped non-finite steps")
    value_coef: float = Field(0.5, ge=0.0, description="weight of the value-head loss (it shares the policy's body)")
    lora: LoraSection = Field(default_factory=LoraSection, description="LoRA adapters (off by default)")
    static_decode: Literal["auto", "on", "off"] = Field(
        "auto", description="rollout sampling with a static KV cache and a compiled decode step "
        "(vista_plugin_decodekit.static_decode); auto: on CUDA only (on CPU there is no compile and no gain), "
        "on: also on CPU (no compile there; tests), off: the dynamic cache always. Rows that continue an "
        "episode's kept KV cache decode on the dynamic cache either way")
    packing: bool = Field(True, description="score an update's micro-batch as a few packed sequences with a "
                          "block attention mask instead of padding every row to the longest (the same log-probs "
                          "and gradients); false: the padded batch, and no shared prefix")
    shared_prefix: bool | None = Field(
        None, description="in packed sequences, compute a prefix that rows share (a GRPO group's prompt: "
        "image, system prompt, history) once, forward and backward, each reply attending to it and to itself "
        "only (the same log-probs and gradients); rows that share nothing are packed side by side. null: on "
        "when the estimator normalises within groups of samples (grpo, dr_grpo, rloo, ...), off otherwise")


class LocalEngineConfig(Section):
    """What the local trainer reads: the run config's neutral sections and ``engine_config.local``."""

    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection, description="the run's algorithm")
    trainer: TrainerSection = Field(default_factory=TrainerSection, description="the run's trainer (RL stage)")
    sft: SftSection = Field(default_factory=SftSection, description="the run's sft stage")
    eval: EvalSection = Field(default_factory=EvalSection, description="the run's held-out eval")
    local: LocalSection = Field(default_factory=LocalSection, description="engine_config.local")


def validate_engine_config(run: RunConfig) -> LocalEngineConfig:
    """The local engine's view of ``run``; errors name the full key (``engine_config.local.lora.r``).
    ``engine_config.verl`` is checked too (:mod:`vista_plugin_local.verl_section`): every section of the
    run config is, on every engine."""
    verl_section.check(run)
    return LocalEngineConfig(algorithm=run.algorithm, trainer=run.trainer, sft=run.sft, eval=run.eval,
                             local=engine_section(run, ENGINE_ID, LocalSection))


def groups_samples(estimator: str) -> bool:
    """Whether the estimator compares the samples of a group (its registration needs ``group_ids``)."""
    try:
        spec = vista_rl.host().registry("estimators").spec(estimator)
    except vista_rl.VistaError:
        return False
    return "group_ids" in (spec.metadata.get("needs") or [])


def update_layout(config: LocalEngineConfig) -> Layout:
    """How the update lays out its rows (:mod:`vista_plugin_local.packed_forward`), from
    ``engine_config.local.packing`` and ``shared_prefix`` (null: on for group estimators)."""
    local = config.local
    if not local.packing:
        return "padded"
    share = local.shared_prefix if local.shared_prefix is not None else groups_samples(config.algorithm.estimator)
    return "shared_prefix" if share else "packed"

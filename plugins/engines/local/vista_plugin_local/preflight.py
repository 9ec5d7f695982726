"""What ``vista train`` checks before a local run starts, writing nothing (the ``vista_rl.Engine``
``validate`` contract): every mistake a config can hold is reported before a model is loaded."""

from __future__ import annotations

from pathlib import Path

import torch

import vista_rl
from vista_plugin_local.config import LocalEngineConfig
from vista_plugin_local.policy import autocast_dtype, check_model_dir
from vista_plugin_local.run_dir import check_run_dir
from vista_rl import ConfigError, check_estimator_config, check_loggers, host
from vista_rl.config import RunConfig
from vista_rl.engine_contract import EnginePlan


def check_settings(run: RunConfig) -> None:
    """The checks that need nothing but the config (the engine runs them when it is made)."""
    try:
        host().spec("envs", run.env.id)
    except vista_rl.UnknownItemError as exc:
        raise ConfigError(f"env.id: {exc}") from None
    if run.rollout.sampling.stop:
        raise ConfigError("rollout.sampling.stop: the local engine ends a turn at <|im_end|> and does not "
                          "support stop strings; remove them")


def plan(run: RunConfig, cfg: LocalEngineConfig, device: torch.device, run_dir: Path, resuming: bool) -> EnginePlan:
    """Check the run directory, the model directory, the estimator and its parameters, SFT data and
    the device's precision; the plan says what the run will do."""
    check_run_dir(run_dir, resuming)
    check_model_dir(run.model.path)
    uses_critic = cfg.algorithm.uses_critic
    check_loggers(cfg.trainer.loggers)
    if cfg.trainer.steps:
        check_estimator_config(cfg.algorithm)
    if cfg.sft.steps and cfg.sft.source == "jsonl" and not Path(str(cfg.sft.path)).is_file():
        raise ConfigError(f"sft.path: {cfg.sft.path} does not exist; record trajectories first or use "
                          "sft.source: oracle")
    autocast_dtype(cfg.local.precision, device)
    stages = []
    if cfg.eval.at_start:
        stages.append("evaluate the untrained model")
    if cfg.sft.steps:
        stages.append(f"SFT {cfg.sft.steps} steps on {cfg.sft.source} data (lr {cfg.sft.lr:g})")
    if cfg.trainer.steps:
        stages.append(f"RL {cfg.trainer.steps} steps of {cfg.trainer.seeds_per_step} seeds x "
                      f"{run.rollout.group_size} samples, {cfg.algorithm.estimator}"
                      f"{' + value head' if uses_critic else ''} (lr {cfg.trainer.lr:g})")
    stages.append(f"evaluate on {cfg.eval.seeds.count} held-out seeds")
    return EnginePlan(engine="local", details=f"device {device}; " + "; then ".join(stages))

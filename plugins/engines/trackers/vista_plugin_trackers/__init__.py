"""Experiment trackers for VISTA runs: wandb and MLflow as ``trainer.loggers`` entries.

A plugin of its own (``vista-plugin-trackers``) so that the core and the engines never depend on a
tracker's package: ``pip install vista-plugin-trackers`` adds ``wandb`` and ``mlflow`` to
``vista loggers``.  Only lazy ``"module:Class"`` targets here: wandb and mlflow import when a run
makes the logger, never when the plugin loads.
"""

from __future__ import annotations

from vista_rl import RegisterLogger, hookimpl

__all__ = ["register_loggers"]


@hookimpl
def register_loggers(register: RegisterLogger) -> None:
    register("wandb", "vista_plugin_trackers.wandb_logger:WandbLogger",
             description="Weights & Biases; offline by default: run files under RUN_DIR/wandb (wandb sync uploads)")
    register("mlflow", "vista_plugin_trackers.mlflow_logger:MlflowLogger",
             description="MLflow; a local file store under RUN_DIR/mlruns by default, or any tracking_uri")

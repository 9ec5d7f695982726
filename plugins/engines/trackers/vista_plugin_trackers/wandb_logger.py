"""Weights & Biases as a VISTA logger: offline by default, so a run needs no account or network and
its history stays under the run directory (``RUN_DIR/wandb/offline-run-*``) until ``wandb sync``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from vista_rl import MetricsLogger, RunStatus, scalar_metrics


class WandbLogger(MetricsLogger):
    """``trainer.loggers: [{id: wandb, project: ..., mode: offline}]``.

    ``mode: online`` logs to the W&B service (it needs ``wandb login``); the default ``offline``
    writes the same records to local run files.  The run config becomes the W&B run config, and
    every record's numbers are logged at the engine's global step under the names every VISTA
    logger uses (``rl/reward_mean``, ``eval/success/value``).
    """

    def __init__(self, project: str = "vista", mode: Literal["offline", "online"] = "offline",
                 entity: str | None = None, name: str | None = None, group: str | None = None,
                 tags: list[str] | None = None) -> None:
        if mode not in ("offline", "online"):
            raise ValueError(f"wandb logger: mode must be 'offline' or 'online', not {mode!r}")
        self.project, self.mode, self.entity, self.name, self.group = project, mode, entity, name, group
        self.tags = list(tags) if tags else None
        self.run: Any = None

    def destination(self, run_dir: Path) -> str:
        """Where the run goes: its offline files under ``run_dir``, or with ``mode: online`` the W&B
        service (``WANDB_BASE_URL``, default https://api.wandb.ai), which the run engine prints at start."""
        if self.mode == "offline":
            return str(run_dir / "wandb")
        base = os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
        place = "/".join(part for part in (self.entity, self.project) if part)
        return f"{base.rstrip('/')} (W&B project {place})"

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        import wandb

        settings = wandb.Settings(silent=True, console="off", disable_git=True, save_code=False,
                                  x_disable_stats=True)
        # reinit="create_new": several runs in one process (tests, notebooks) never finish each other.
        self.run = wandb.init(dir=str(run_dir), config=config, settings=settings, reinit="create_new",
                              name=self.name or run_dir.name, project=self.project, mode=self.mode,
                              entity=self.entity, group=self.group, tags=self.tags)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(scalar_metrics(metrics), step=step)

    def finish(self, status: RunStatus) -> None:
        if self.run is not None:
            self.run.finish(exit_code=0 if status == "completed" else 1)
            self.run = None

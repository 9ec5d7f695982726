"""The ``verl`` engine: datasets + composed, validated verl config + ``python -m verl.trainer.main_ppo``.

``vista train CONFIG.yaml --set engine=verl`` (or ``engine: verl`` in the YAML) makes this engine;
``engine_config.dry_run: true`` (or ``vista train --engine verl --dry-run CONFIG.yaml``) prints the command
and the full composed config instead of launching.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from vista_plugin_verl.config import VerlEngineConfig, compose_overrides, compose_verl_config, engine_config
from vista_plugin_verl.dataset import write_env_datasets
from vista_rl import ConfigError
from vista_rl.config import RunConfig


class VerlEngine:
    """Same interface as the local engine: ``VerlEngine(run=..., resume=...).run() -> summary``."""

    def __init__(self, run: RunConfig, resume: Any = None, dry_run: bool | None = None) -> None:
        if resume is not None:
            raise ConfigError("--resume: the verl engine resumes through verl (trainer.resume_mode); "
                              "add it to engine_config.overrides")
        self.run_config = run
        self.cfg: VerlEngineConfig = engine_config(run)
        if dry_run is not None:
            self.cfg.dry_run = dry_run
        self.run_dir = Path(run.output_dir)

    def prepare(self) -> tuple[list[str], Any]:
        """Write the parquet datasets; compose and validate verl's config.  Returns (command, config)."""
        trainer = self.cfg.trainer
        train, val = write_env_datasets(self.run_dir / "data", self.run_config.env.id, self.run_config.env.config,
                                        trainer.train_seeds.values(), trainer.val_seeds.values(),
                                        self.run_config.rollout.max_turns)
        overrides = compose_overrides(self.run_config, self.cfg, train.resolve(), val.resolve())
        config = compose_verl_config(overrides)
        python = self.cfg.python or sys.executable
        return [python, "-m", "verl.trainer.main_ppo", *overrides], config

    def run(self) -> dict[str, Any]:
        from omegaconf import OmegaConf

        command, config = self.prepare()
        config_text = OmegaConf.to_yaml(config)
        (self.run_dir / "verl_config.yaml").write_text(config_text, encoding="utf-8")
        (self.run_dir / "verl_command.sh").write_text(shlex.join(command) + "\n", encoding="utf-8")
        (self.run_dir / "config.yaml").write_text(
            yaml.safe_dump(self.run_config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        summary: dict[str, Any] = {"engine": "verl", "run_dir": str(self.run_dir), "env": self.run_config.env.id,
                                   "command": command, "dry_run": self.cfg.dry_run}
        if self.cfg.dry_run:
            print(shlex.join(command))
            print(config_text)
            return summary
        completed = subprocess.run(command, check=False)
        summary["returncode"] = completed.returncode
        if completed.returncode != 0:
            raise ConfigError(f"verl.trainer.main_ppo exited with {completed.returncode}; see its log above")
        return summary

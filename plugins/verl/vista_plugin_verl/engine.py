"""The ``verl`` engine: datasets + composed, validated verl config + ``python -m verl.trainer.main_ppo``.

``vista train CONFIG.yaml --engine verl`` (or ``engine: verl`` in the YAML) makes this engine from the
same run config the local engine reads: the neutral sections map onto verl's keys and
``engine_config.verl`` adds the cluster.  ``vista train --engine verl --dry-run CONFIG.yaml`` prints
the command and the full composed config without writing or launching anything;
``vista train --resume RUN_DIR`` continues from verl's last checkpoint in ``RUN_DIR/checkpoints``.
"""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from vista_plugin_verl import attention
from vista_plugin_verl.config import (
    ENGINE_ID,
    LATEST_CHECKPOINT,
    VerlEngineConfig,
    check_neutral,
    compose_overrides,
    compose_verl_config,
    engine_config,
)
from vista_rl import ConfigError, EnginePlan, UnknownItemError, VistaError
from vista_rl.config import RunConfig

#: How to install what the verl engine runs (verl 0.9.x with its default trainer's TransferQueue).
INSTALL = "pip install -e 'plugins/verl[verl]'"


class VerlEngine:
    """A ``vista_rl.Engine``: ``VerlEngine(run=..., resume=...)``, then ``validate()`` and ``run()``."""

    def __init__(self, run: RunConfig, resume: Path | None = None) -> None:
        self.run_config = run
        self.resume = resume
        self.cfg: VerlEngineConfig = engine_config(run)
        self.run_dir = Path(run.output_dir)

    def _data_files(self) -> tuple[Path, Path]:
        data = (self.run_dir / "data").resolve()
        return data / "train.parquet", data / "val.parquet"

    def _command(self, overrides: list[str]) -> list[str]:
        return [self.cfg.python or sys.executable, "-m", "verl.trainer.main_ppo", *overrides]

    def validate(self) -> EnginePlan:
        """Map the run config onto verl's keys and, where verl is installed, compose it and run verl's
        own ``validate_config``; writes nothing."""
        if self.resume is not None and not (self.run_dir / "checkpoints" / LATEST_CHECKPOINT).is_file():
            raise ConfigError(f"--resume {self.run_dir}: no verl checkpoint there "
                              f"(checkpoints/{LATEST_CHECKPOINT}; trainer.checkpoint_every sets how often verl saves)")
        import vista_rl

        try:
            vista_rl.host().spec("envs", self.run_config.env.id)
        except UnknownItemError as exc:
            raise ConfigError(f"env.id: {exc}") from None
        warnings = check_neutral(self.run_config, self.cfg)
        flash_attn = attention.flash_attn_installed(self.cfg.python)
        overrides = compose_overrides(self.run_config, self.cfg, *self._data_files(), resume=self.resume is not None,
                                      flash_attn=flash_attn)
        warnings += [note for note in [attention.note(flash_attn)] if note]
        details = shlex.join(self._command(overrides))
        if importlib.util.find_spec("verl") is None:
            warnings.append("verl is not installed here, so verl's own loader did not check the composed config "
                            "(install vista-plugin-verl[verl], or run scripts/test.d/verl.sh, to check it)")
        else:
            from omegaconf import OmegaConf

            config = compose_verl_config(overrides)
            details += "\n" + OmegaConf.to_yaml(config)
            missing = self._missing_trainer_module(config)
            if missing:
                warnings.append(missing)
        return EnginePlan(engine=ENGINE_ID, details=details, warnings=tuple(warnings))

    def _missing_trainer_module(self, config: Any) -> str | None:
        """verl 0.9.1's default trainer (``trainer.use_v1``) imports ``transfer_queue``, which only verl's
        ``verl-core`` extra installs: without it ``main_ppo`` fails after Ray and the workers have
        started.  Checked where this interpreter is the one that runs verl."""
        if self.cfg.python is not None or not config.trainer.get("use_v1", False):
            return None
        if importlib.util.find_spec("transfer_queue") is not None:
            return None
        return ("trainer.use_v1: verl's default trainer imports transfer_queue, missing from this environment: "
                "pip install 'verl[verl-core]', or add trainer.use_v1=false to engine_config.verl.overrides")

    def prepare(self) -> tuple[list[str], Any]:
        """Write the parquet datasets; compose and validate verl's config.  Returns (command, config)."""
        from vista_plugin_verl.dataset import run_rows, write_rows

        run = self.run_config
        train, val = write_rows(self.run_dir / "data", run_rows(run))
        overrides = compose_overrides(run, self.cfg, train.resolve(), val.resolve(), resume=self.resume is not None,
                                      flash_attn=attention.flash_attn_installed(self.cfg.python))
        return self._command(overrides), compose_verl_config(overrides)

    def run(self) -> dict[str, Any]:
        if importlib.util.find_spec("verl") is None:
            # the config is composed and checked here, with verl's own loader, before anything launches
            raise ConfigError(f"the verl engine needs verl installed in this environment ({sys.executable}): "
                              f"{INSTALL}; then check the install with scripts/verl_cpu_step/run.sh or "
                              "`vista train --engine verl CONFIG --dry-run` (docs/cluster.md)")
        from omegaconf import OmegaConf

        for warning in check_neutral(self.run_config, self.cfg):
            print(f"warning: {warning}", file=sys.stderr)
        command, config = self.prepare()
        missing = self._missing_trainer_module(config)
        if missing:
            raise ConfigError(missing)
        (self.run_dir / "verl_config.yaml").write_text(OmegaConf.to_yaml(config), encoding="utf-8")
        (self.run_dir / "verl_command.sh").write_text(shlex.join(command) + "\n", encoding="utf-8")
        (self.run_dir / "config.yaml").write_text(
            yaml.safe_dump(self.run_config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        completed = subprocess.run(command, check=False)
        summary: dict[str, Any] = {"engine": ENGINE_ID, "run_dir": str(self.run_dir), "env": self.run_config.env.id,
                                   "command": command, "returncode": completed.returncode}
        if completed.returncode != 0:
            raise VistaError(f"verl.trainer.main_ppo exited with {completed.returncode}; see its log above")
        return summary

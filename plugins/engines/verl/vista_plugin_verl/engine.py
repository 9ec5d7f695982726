"""The ``verl`` engine: datasets + composed, validated verl config + ``python -m verl.trainer.main_ppo``.

``vista train CONFIG.yaml --engine verl`` (or ``engine: verl`` in the YAML) makes this engine from the
same run config the local engine reads: the neutral sections map onto verl's keys and
``engine_config.verl`` adds the cluster.  ``vista train --engine verl --dry-run CONFIG.yaml`` prints
the command and the full composed config without writing or launching anything;
``vista train --resume RUN_DIR`` continues from verl's last checkpoint in ``RUN_DIR/checkpoints``.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vista_plugin_verl import attention, sft
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
INSTALL = "pip install -e 'plugins/engines/verl[verl]'"


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

    def stages(self, flash_attn: bool) -> list[Stage]:
        """What runs, in order: with an SFT stage, the untrained model's evaluation (``eval.at_start``,
        verl's ``trainer.val_only``) and verl's SFT trainer, then RL from the SFT model."""
        run, resume = self.run_config, self.resume is not None
        train, val = self._data_files()
        rl = compose_overrides(run, self.cfg, train, val, resume=resume, flash_attn=flash_attn)
        if not run.sft.steps or resume:  # a resumed run continues RL from its own checkpoint
            return [Stage("rl", "ppo", self._command(rl))]
        out = []
        if run.eval.at_start:
            untrained = compose_overrides(run, self.cfg, train, val, flash_attn=flash_attn, model_path=run.model.path)
            out.append(Stage("eval_untrained", "ppo", self._command(
                [*untrained, "trainer.val_before_train=true", "trainer.val_only=true"])))
        sft_train = (sft.sft_dir(self.run_dir) / "data" / "train.parquet").resolve()
        sft_overrides = sft.overrides(run, self.cfg, sft_train, flash_attn=flash_attn)
        gpus = self.cfg.cluster.n_gpus_per_node
        out.append(Stage("sft", "sft", sft.command(self.cfg.python or sys.executable, gpus, sft_overrides),
                         env=sft.tracking_env(run)))
        # checked before the SFT model exists: verl's loader reads the model, so the base model stands in
        check = compose_overrides(run, self.cfg, train, val, flash_attn=flash_attn, model_path=run.model.path)
        return [*out, Stage("rl", "ppo", self._command(rl), check=check)]

    def validate(self) -> EnginePlan:
        """Map the run config onto verl's keys and, where verl is installed, compose it and run verl's
        own ``validate_config`` (and compose the SFT trainer's config); writes nothing."""
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
        warnings += [note for note in [attention.note(flash_attn)] if note]
        if self.run_config.sft.steps and self.cfg.cluster.nnodes > 1:
            warnings.append(f"sft.steps: verl's SFT trainer runs on this node's {self.cfg.cluster.n_gpus_per_node} "
                            "GPUs (torchrun --standalone); RL then uses every node")
        stages = self.stages(flash_attn)
        details = "\n".join(f"# {stage.name}: {stage.shell()}" for stage in stages)
        if importlib.util.find_spec("verl") is None:
            warnings.append("verl is not installed here, so verl's own loader did not check the composed config "
                            "(install vista-plugin-verl[verl], or run scripts/test.d/verl.sh, to check it)")
        else:
            from omegaconf import OmegaConf

            for stage in stages:
                config = stage.compose()
                if stage.name == "rl":
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

    def prepare(self) -> list[Stage]:
        """Write the parquet datasets (RL rows; with an SFT stage, the oracle's SFT rows) and compose
        and validate every stage's config."""
        from vista_plugin_verl.dataset import run_rows, write_rows

        run = self.run_config
        write_rows(self.run_dir / "data", run_rows(run))
        stages = self.stages(attention.flash_attn_installed(self.cfg.python))
        if any(stage.kind == "sft" for stage in stages):
            rows, summary = sft.oracle_rows(run)
            sft.write_rows(sft.sft_dir(self.run_dir) / "data" / "train.parquet", rows)
            print(summary, file=sys.stderr)
        for stage in stages:
            stage.config = stage.compose()
        return stages

    def run(self) -> dict[str, Any]:
        if importlib.util.find_spec("verl") is None:
            # the config is composed and checked here, with verl's own loader, before anything launches
            raise ConfigError(f"the verl engine needs verl installed in this environment ({sys.executable}): "
                              f"{INSTALL}; then check the install with scripts/verl_cpu_step/run.sh or "
                              "`vista train --engine verl CONFIG --dry-run` (docs/cluster.md)")
        from omegaconf import OmegaConf

        for warning in check_neutral(self.run_config, self.cfg):
            print(f"warning: {warning}", file=sys.stderr)
        stages = self.prepare()
        rl = stages[-1]
        missing = self._missing_trainer_module(rl.config)
        if missing:
            raise ConfigError(missing)
        (self.run_dir / "verl_config.yaml").write_text(OmegaConf.to_yaml(rl.config), encoding="utf-8")
        (self.run_dir / "verl_command.sh").write_text(
            "".join(f"# {stage.name}\n{stage.shell()}\n" for stage in stages), encoding="utf-8")
        (self.run_dir / "config.yaml").write_text(
            yaml.safe_dump(self.run_config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        summary: dict[str, Any] = {"engine": ENGINE_ID, "run_dir": str(self.run_dir), "env": self.run_config.env.id,
                                   "stages": [stage.name for stage in stages], "command": rl.command}
        for stage in stages:
            completed = subprocess.run(stage.command, check=False, env={**os.environ, **stage.env})
            summary[f"returncode_{stage.name}"] = completed.returncode
            if completed.returncode != 0:
                raise VistaError(f"verl's {stage.name} stage exited with {completed.returncode}; see its log above "
                                 f"(the commands are in {self.run_dir / 'verl_command.sh'})")
            if stage.kind == "sft":
                model = sft.hf_model_dir(self.run_dir.resolve(), self.run_config.sft.steps)
                if not (model / "config.json").is_file():
                    raise VistaError(f"verl's SFT trainer finished without a Hugging Face model at {model}")
        summary["returncode"] = 0
        return summary


@dataclass
class Stage:
    """One launch: its name, which verl config it composes (``ppo`` or ``sft``) and its command."""

    name: str
    kind: str
    command: list[str]
    config: Any = None
    #: the overrides verl's loader checks before the stage can run, where they differ (a model that
    #: an earlier stage makes)
    check: list[str] | None = None
    #: environment variables the stage's processes need on top of this one's (verl's tracker settings)
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """The stage as one shell line, its environment first (what ``verl_command.sh`` records)."""
        assignments = [f"{name}={shlex.quote(value)}" for name, value in sorted(self.env.items())]
        return " ".join([*assignments, shlex.join(self.command)])

    @property
    def overrides(self) -> list[str]:
        start = self.command.index("verl.trainer.main_ppo" if self.kind == "ppo" else "verl.trainer.sft_trainer")
        return self.command[start + 1:]

    def compose(self) -> Any:
        overrides = self.check if self.check is not None else self.overrides
        return compose_verl_config(overrides) if self.kind == "ppo" else sft.compose(overrides)

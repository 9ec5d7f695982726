"""The ``local`` engine: one process, one device, a transformers VLM trained on its own rollouts.

This module is the orchestrator: it owns the run state and the order of the stages (evaluate the
untrained model, SFT on oracle or recorded trajectories, evaluate, RL with GRPO or PPO with a value
head, held-out evaluations along the way); each stage's work is a module of its own (``sft_stage``,
``rl_step`` with ``ppo_update``, ``optim``, ``checkpoint``, ``evaluate``, ``run_dir``, ``preflight``).

Every rollout goes through the core ``RolloutEngine``, the path ``vista eval`` takes, so tools,
reflection, context windows, timeouts and remote envs behave in training as in evaluation.  Every
stage resumes exactly from a checkpoint (weights, optimizer, scheduler, RNG states and the position
in the data): ``vista train --resume RUN_DIR``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from vista_plugin_local.config import LocalEngineConfig, validate_engine_config
from vista_plugin_local.evaluate import EvalResult, HeldOutEval
from vista_plugin_local.metrics import plot_reward_success
from vista_plugin_local.optim import Optimization
from vista_plugin_local.policy import Policy, load_pretrained, pick_device
from vista_plugin_local.policy_backend import PolicyBackend
from vista_plugin_local.preflight import check_settings, plan
from vista_plugin_local.rl_step import FAILURES_FILE, RLStep
from vista_plugin_local.run_dir import prepare_run_dir, write_results
from vista_plugin_local.samples import SampleBatch
from vista_plugin_local.sft_stage import batch_indices, sft_examples, sft_update
from vista_rl import RunLoggers, RunStatus, VistaError
from vista_rl.config import RunConfig
from vista_rl.engine_contract import EnginePlan
from vista_rl.rollout import RolloutEngine

__all__ = ["FAILURES_FILE", "EngineState", "LocalEngine", "StepHook", "TrainingError"]

#: Called after every optimizer step with (stage, step); tests use it to interrupt a run.
StepHook = Callable[[str, int], None]


class TrainingError(VistaError):
    """Training cannot go on (e.g. too many non-finite steps); the last checkpoint is kept."""


@dataclass
class EngineState:
    """Where the run is: the data position that, with the RNG states, makes resuming exact."""

    stage: str = "start"  # start -> sft -> rl -> done
    sft_step: int = 0
    rl_step: int = 0
    nan_steps: list[int] = field(default_factory=list)
    evals: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def global_step(self) -> int:
        return self.sft_step + self.rl_step


class LocalEngine:
    """Train ``run.model`` on ``run.env`` as the run config says (a ``vista_rl.Engine``): the neutral
    sections plus ``engine_config.local``."""

    def __init__(self, run: RunConfig, resume: str | Path | None = None, console: Console | None = None,
                 step_hook: StepHook | None = None) -> None:
        self.run_config = run
        self.config: LocalEngineConfig = validate_engine_config(run)
        self.console = console or Console()
        self.step_hook = step_hook
        self.run_dir = Path(resume) if resume is not None else Path(run.output_dir)
        self.resuming = resume is not None
        self.state = EngineState()
        #: The latest RL step's episodes (tests and step hooks inspect it).
        self.last_batch: SampleBatch | None = None
        self.optimization: Optimization | None = None
        self.device = pick_device(self.config.local.device)
        #: One training sequence per turn (``rollout.sequences``), e.g. for ``window_size: 0``.
        self.per_turn = run.rollout.per_turn_sequences
        check_settings(run)

    def validate(self) -> EnginePlan:
        """Check what can be checked before training, writing nothing (the ``vista_rl.Engine`` contract):
        the run directory, the model directory, the estimator and its parameters, SFT data, device."""
        return plan(self.run_config, self.config, self.device, self.run_dir, self.resuming)

    # ------------------------------------------------------------------- set-up
    def _build_policy(self) -> Policy:
        model, processor = load_pretrained(self.run_config.model.path)
        local = self.config.local
        policy = Policy(model, processor, self.device, value_head=self.config.algorithm.uses_critic,
                        precision=local.precision, image_size=local.image_size)
        if local.lora.enabled:
            policy.enable_lora(local.lora)
        return policy

    def _open_rollouts(self) -> None:
        """One rollout path: training and evaluation drive the core ``RolloutEngine`` through the
        in-memory policy (``PolicyBackend``), with the run's rollout settings."""
        self.backend = PolicyBackend(self.policy)
        self.rollout = RolloutEngine(self.backend, self.run_config.rollout, seed=self.run_config.seed)
        self.held_out = HeldOutEval(self.backend, self.run_config)

    def _close_rollouts(self) -> None:
        for engine in (getattr(self, "rollout", None), getattr(self, "held_out", None)):
            if engine is not None:
                engine.close()

    def _optimization(self, lr: float, total_steps: int, warmup: int, schedule: str,
                      checkpoint: dict[str, Any] | None, stage: str) -> Optimization:
        """A fresh optimizer for a stage, restored (with the RNG states) when resuming inside it."""
        trainer = self.config.trainer
        optimization = Optimization(self.policy.parameters(), lr, betas=trainer.betas,
                                    weight_decay=trainer.weight_decay, total_steps=total_steps, warmup=warmup,
                                    schedule=schedule)
        if checkpoint is not None and checkpoint["engine"]["stage"] == stage:
            optimization.load(checkpoint)
            set_rng_state(checkpoint["rng"])
        return optimization

    # ---------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Run every remaining stage; returns the results summary (also in ``results.json``)."""
        prepare_run_dir(self.run_dir, self.run_config, self.resuming)
        torch.manual_seed(self.run_config.seed)
        random.seed(self.run_config.seed)
        np.random.seed(self.run_config.seed % 2**32)
        # Read (and, for a pickle or foreign file, refuse) the checkpoint before any other work.
        checkpoint: dict[str, Any] | None = load_checkpoint(self.run_dir) if self.resuming else None
        self.policy = self._build_policy()
        self._open_rollouts()
        # Every tracker in trainer.loggers gets the same records and config; none can stop the run.
        self.loggers = RunLoggers(self.run_config.trainer.loggers)
        self.loggers.start(self.run_dir, self.run_config.model_dump(mode="json"))
        status: RunStatus = "failed"
        if checkpoint is not None:
            self.state = EngineState(**checkpoint["engine"])
            self.policy.load_state(checkpoint["policy"])
            self.console.print(f"resuming {self.run_dir} at stage {self.state.stage}, "
                               f"SFT step {self.state.sft_step}, RL step {self.state.rl_step}")
        try:
            with self._progress() as progress:
                self.progress = progress
                self._stage_start()
                self._stage_sft(checkpoint)
                self._stage_rl(checkpoint)
            status = "completed"
        except KeyboardInterrupt:
            status = "interrupted"
            path = self._save()
            self.console.print(f"[yellow]interrupted: checkpoint saved to {path}; continue with "
                               f"`vista train --resume {self.run_dir}`[/yellow]")
            raise
        finally:
            self.loggers.finish(status)
            self._close_rollouts()
        return self._finish()

    def _progress(self) -> Progress:
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self.console,
                        transient=False, disable=not self.console.is_terminal)

    def _stage_start(self) -> None:
        if self.state.stage != "start":
            return
        if self.config.eval.at_start:
            self._evaluate("untrained")
        self.state.stage = "sft"

    def _sft_examples(self) -> list[EpisodeTokens]:
        return sft_examples(self.run_config, self.policy.encoder, self.per_turn, self.console)

    def _stage_sft(self, checkpoint: dict[str, Any] | None) -> None:
        sft, state = self.config.sft, self.state
        if state.stage != "sft":
            return
        if sft.steps == 0:
            state.stage = "rl"
            return
        examples = self._sft_examples()
        self.optimization = optimization = self._optimization(sft.lr, sft.steps, sft.warmup_steps, sft.scheduler,
                                                                  checkpoint, "sft")
        task = self.progress.add_task("SFT", total=sft.steps, completed=state.sft_step, info="")
        while state.sft_step < sft.steps:
            step = state.sft_step
            batch = [examples[i] for i in batch_indices(self.run_config.seed, len(examples), sft.batch_size, step)]
            started, lr = time.perf_counter(), optimization.lr
            metrics = sft_update(self.policy, optimization, batch, self.config.trainer.micro_batch_size,
                                 sft.max_grad_norm)
            if metrics["nan_skipped"]:
                self._record_nan("sft", step + 1)
            metrics.update(stage="sft", step=step + 1, global_step=state.global_step + 1, lr=lr,
                           seconds=time.perf_counter() - started)
            state.sft_step += 1
            self._log_step(metrics)
            self.progress.update(task, advance=1, info=f"loss {metrics['loss']:.3f}")
            self._after_step("sft", state.sft_step)
        self._save()
        self.policy.save_pretrained(self.run_dir / "models" / "sft")
        if self.config.eval.after_sft:
            self._evaluate("sft")
        state.stage = "rl"

    def _stage_rl(self, checkpoint: dict[str, Any] | None) -> None:
        trainer, algorithm, state = self.config.trainer, self.config.algorithm, self.state
        if state.stage != "rl":
            return
        if trainer.steps > 0:
            if algorithm.kl_coef > 0:
                self.policy.make_reference()
            per_step = algorithm.ppo_epochs * algorithm.mini_batches
            self.optimization = self._optimization(trainer.lr, trainer.steps * per_step,
                                                   trainer.warmup_steps * per_step, trainer.scheduler, checkpoint, "rl")
            rl_step = RLStep(self.run_config, self.policy, self.backend, self.rollout, self.optimization,
                             value_coef=self.config.local.value_coef, run_dir=self.run_dir, console=self.console)
            task = self.progress.add_task("RL", total=trainer.steps, completed=state.rl_step, info="")
            while state.rl_step < trainer.steps:
                result = rl_step(state.rl_step, state.global_step)
                self.last_batch = result.batch
                metrics = result.metrics
                if metrics["nan_skipped"]:
                    self._record_nan("rl", state.rl_step + 1)
                state.rl_step += 1
                self._log_step(metrics)
                self.progress.update(task, advance=1, info=f"reward {metrics['reward_mean']:.2f} "
                                     f"success {metrics['success_rate']:.2f}")
                done = state.rl_step == trainer.steps
                if trainer.eval_every and state.rl_step % trainer.eval_every == 0 and not done:
                    self._evaluate(f"rl-step-{state.rl_step}")
                self._after_step("rl", state.rl_step)
        self.policy.save_pretrained(self.run_dir / "models" / "final")
        self._evaluate("rl" if trainer.steps > 0 else "final")
        state.stage = "done"
        self._save()

    # ------------------------------------------------------------------ per step
    def _log_step(self, metrics: dict[str, Any]) -> None:
        """Log the step, then stop if too many steps were non-finite (after logging, so the record
        shows every skipped step)."""
        self.loggers.log(metrics, metrics["global_step"])
        nan_steps = self.state.nan_steps
        if len(nan_steps) >= self.config.local.max_nan_steps:
            path = self._save()
            raise TrainingError(
                f"stopped after {len(nan_steps)} non-finite steps (global steps {nan_steps}); a checkpoint "
                f"of this point is in {path} (no update was applied on those steps). Lower the learning rate "
                "(trainer.lr / sft.lr), keep trainer.max_grad_norm set, or raise "
                "engine_config.local.max_nan_steps")

    def _record_nan(self, stage: str, step: int) -> None:
        self.state.nan_steps.append(self.state.global_step + 1)
        self.console.print(f"[yellow]{stage} step {step}: non-finite loss or gradient; update skipped "
                           f"({len(self.state.nan_steps)} so far)[/yellow]")

    def _after_step(self, stage: str, step: int) -> None:
        every = self.config.trainer.checkpoint_every
        if every and step % every == 0:
            self._save()
        if self.step_hook is not None:
            self.step_hook(stage, step)

    def _save(self) -> Path:
        optimization = self.optimization.state() if self.optimization is not None else {}
        state = {"engine": asdict(self.state), "policy": self.policy.state(), "optimizer": optimization.get("optimizer"),
                 "scheduler": optimization.get("scheduler"), "rng": rng_state()}
        name = f"step-{self.state.global_step:06d}"
        return save_checkpoint(self.run_dir, name, state, self.config.trainer.keep_checkpoints)

    def _evaluate(self, label: str) -> EvalResult:
        eval_cfg = self.config.eval
        task = self.progress.add_task(f"eval {label}", total=None, info=f"{eval_cfg.seeds.count} held-out seeds")
        result = self.held_out(label, eval_cfg.temperature)
        self.progress.update(task, total=1, completed=1, info=f"success {result.success}")
        record = result.to_dict()
        record.update(stage="eval", rl_step=self.state.rl_step, sft_step=self.state.sft_step,
                      global_step=self.state.global_step)
        self.loggers.log(record, self.state.global_step)
        self.state.evals[label] = record
        cut = (f"; [dark_orange]{result.cut_off} cut off by a limit the env did not choose "
               f"(rollout.max_turns={self.run_config.rollout.max_turns})[/dark_orange]" if result.cut_off else "")
        self.console.print(f"eval [bold]{label}[/bold]: success {result.success} reward {result.reward} "
                           f"({result.episodes} held-out episodes{cut})")
        return result

    def _finish(self) -> dict[str, Any]:
        plot = plot_reward_success(self.run_dir)
        summary = {"run_dir": str(self.run_dir), "env": self.run_config.env.id,
                   "estimator": self.config.algorithm.estimator, "evals": self.state.evals,
                   "nan_steps": self.state.nan_steps, "plot": str(plot) if plot else None,
                   "loggers": self.loggers.report()}
        write_results(self.run_dir, summary)
        return summary

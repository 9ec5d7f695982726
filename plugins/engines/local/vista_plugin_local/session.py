"""One training run of the local engine, built whole: :class:`TrainingSession` gets every collaborator
(policy, rollouts, loggers, progress display, state, checkpoint) in its constructor and runs the stages
in order: evaluate the untrained model, SFT on oracle or recorded trajectories, evaluate, RL with GRPO
or PPO with a value head, held-out evaluations along the way.

:class:`~vista_plugin_local.trainer.LocalEngine` builds these parts and the session; nothing here
creates a collaborator, so no stage has to ask whether one exists yet.  Each stage's work is a module
of its own (``sft_stage``, ``rl_step`` with ``ppo_update``, ``optim``, ``checkpoint``, ``evaluate``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.checkpoint import rng_state, save_checkpoint, set_rng_state
from vista_plugin_local.config import LocalEngineConfig
from vista_plugin_local.evaluate import EvalResult
from vista_plugin_local.optim import Optimization
from vista_plugin_local.policy import Policy
from vista_plugin_local.rl_step import RLStep, step_sampling
from vista_plugin_local.rollouts import TrainingRollouts
from vista_plugin_local.samples import SampleBatch
from vista_plugin_local.sft_stage import batch_indices, sft_update
from vista_plugin_local.step_metrics import SftStepMetrics, StepMetrics
from vista_rl import RunLoggers, VistaError
from vista_rl.config import RunConfig, TrainerSection

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


def new_optimization(policy: Policy, trainer: TrainerSection, lr: float, total_steps: int, warmup: int,
                     schedule: str, checkpoint: dict[str, Any] | None = None,
                     stage: str | None = None) -> Optimization:
    """A fresh optimizer and schedule for a stage, restored (with the RNG states) from ``checkpoint``
    when it was saved inside that same ``stage``."""
    optimization = Optimization(policy.parameters(), lr, betas=trainer.betas, weight_decay=trainer.weight_decay,
                                total_steps=total_steps, warmup=warmup, schedule=schedule)
    if checkpoint is not None and checkpoint["engine"]["stage"] == stage:
        optimization.load(checkpoint)
        set_rng_state(checkpoint["rng"])
    return optimization


class TrainingSession:
    """Runs the remaining stages of one run over collaborators built beforehand.

    ``checkpoint`` is the one being resumed (``state`` already read from it), ``sft_examples`` makes
    the SFT data when the SFT stage starts (never before: a resumed RL stage does not need it), and
    ``step_hook`` is called after every optimizer step."""

    def __init__(self, *, run: RunConfig, config: LocalEngineConfig, run_dir: Path, policy: Policy,
                 rollouts: TrainingRollouts, loggers: RunLoggers, progress: Progress, console: Console,
                 state: EngineState, checkpoint: dict[str, Any] | None,
                 sft_examples: Callable[[], list[EpisodeTokens]], step_hook: StepHook | None) -> None:
        self.run_config = run
        self.config = config
        self.run_dir = run_dir
        self.policy = policy
        self.rollouts = rollouts
        self.loggers = loggers
        self.progress = progress
        self.console = console
        self.state = state
        self.checkpoint = checkpoint
        self.sft_examples = sft_examples
        self.step_hook = step_hook
        #: The current stage's optimizer (saved with every checkpoint); none before the first stage.
        self.optimization: Optimization | None = None
        #: The latest RL step's episodes (tests and step hooks inspect it).
        self.last_batch: SampleBatch | None = None

    def run(self) -> None:
        """Every remaining stage; an interrupt saves a checkpoint to resume from, then propagates."""
        try:
            with self.progress:
                self._stage_start()
                self._stage_sft()
                self._stage_rl()
        except KeyboardInterrupt:
            path = self.save()
            self.console.print(f"[yellow]interrupted: checkpoint saved to {path}; continue with "
                               f"`vista train --resume {self.run_dir}`[/yellow]")
            raise

    # ------------------------------------------------------------------- stages
    def _stage_start(self) -> None:
        if self.state.stage != "start":
            return
        if self.config.eval.at_start:
            self._evaluate("untrained")
        self.state.stage = "sft"

    def _stage_sft(self) -> None:
        sft, state = self.config.sft, self.state
        if state.stage != "sft":
            return
        if sft.steps == 0:
            state.stage = "rl"
            return
        examples = self.sft_examples()
        self.optimization = optimization = new_optimization(
            self.policy, self.config.trainer, sft.lr, sft.steps, sft.warmup_steps, sft.scheduler, self.checkpoint, "sft")
        task = self.progress.add_task("SFT", total=sft.steps, completed=state.sft_step, info="")
        while state.sft_step < sft.steps:
            step = state.sft_step
            batch = [examples[i] for i in batch_indices(self.run_config.seed, len(examples), sft.batch_size, step)]
            started, lr = time.perf_counter(), optimization.lr
            update = sft_update(self.policy, optimization, batch, self.config.trainer.micro_batch_size,
                                sft.max_grad_norm)
            if update["nan_skipped"]:
                self._record_nan("sft", step + 1)
            metrics: SftStepMetrics = {**update, "stage": "sft", "step": step + 1,
                                       "global_step": state.global_step + 1, "lr": lr,
                                       "seconds": time.perf_counter() - started}
            state.sft_step += 1
            self._log_step(metrics)
            self.progress.update(task, advance=1, info=f"loss {metrics['loss']:.3f}")
            self._after_step("sft", state.sft_step)
        self.save()
        self.policy.save_pretrained(self.run_dir / "models" / "sft")
        if self.config.eval.after_sft:
            self._evaluate("sft")
        state.stage = "rl"

    def _stage_rl(self) -> None:
        trainer, algorithm, state = self.config.trainer, self.config.algorithm, self.state
        if state.stage != "rl":
            return
        if trainer.steps > 0:
            if algorithm.kl_coef > 0:
                self.policy.make_reference()
            per_step = algorithm.ppo_epochs * algorithm.mini_batches
            self.optimization = new_optimization(self.policy, trainer, trainer.lr, trainer.steps * per_step,
                                                 trainer.warmup_steps * per_step, trainer.scheduler,
                                                 self.checkpoint, "rl")
            rl_step = RLStep(self.run_config, self.policy, self.rollouts, self.optimization,
                             value_coef=self.config.local.value_coef, run_dir=self.run_dir, console=self.console)
            task = self.progress.add_task("RL", total=trainer.steps, completed=state.rl_step, info="")
            while state.rl_step < trainer.steps:
                result = rl_step(state.rl_step, state.global_step, step_sampling(self.run_config, state.rl_step))
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
        self.save()

    # ----------------------------------------------------------------- per step
    def _log_step(self, metrics: StepMetrics | SftStepMetrics) -> None:
        """Log the step, then stop if too many steps were non-finite (after logging, so the record
        shows every skipped step)."""
        self.loggers.log(dict(metrics), metrics["global_step"])
        nan_steps = self.state.nan_steps
        if len(nan_steps) >= self.config.local.max_nan_steps:
            path = self.save()
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
            self.save()
        if self.step_hook is not None:
            self.step_hook(stage, step)

    def save(self) -> Path:
        """A checkpoint of this point: weights, optimizer, scheduler, RNG states and the state."""
        optimization = self.optimization.state() if self.optimization is not None else {}
        state = {"engine": asdict(self.state), "policy": self.policy.state(), "optimizer": optimization.get("optimizer"),
                 "scheduler": optimization.get("scheduler"), "rng": rng_state()}
        name = f"step-{self.state.global_step:06d}"
        return save_checkpoint(self.run_dir, name, state, self.config.trainer.keep_checkpoints)

    def _evaluate(self, label: str) -> EvalResult:
        eval_cfg = self.config.eval
        task = self.progress.add_task(f"eval {label}", total=None, info=f"{eval_cfg.seeds.count} held-out seeds")
        result = self.rollouts.held_out(label, eval_cfg.temperature)
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

"""The ``local`` engine: one process, one device, a transformers VLM trained on its own rollouts.

:class:`LocalEngine` is the ``vista_rl.Engine``: it checks the run (``validate``), then ``run`` builds
every part of a run whole (the run directory, the policy, its rollouts, the loggers, the state read
from a checkpoint) and hands them to one :class:`~vista_plugin_local.session.TrainingSession`, which
runs the stages; each stage's work is a module of its own (``sft_stage``, ``rl_step`` with
``ppo_update``, ``optim``, ``checkpoint``, ``evaluate``, ``run_dir``, ``preflight``).

Every rollout goes through the core ``RolloutEngine``, the path ``vista eval`` takes, so tools,
reflection, context windows, timeouts and remote envs behave in training as in evaluation.  Every
stage resumes exactly from a checkpoint (weights, optimizer, scheduler, RNG states and the position
in the data): ``vista train --resume RUN_DIR``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.checkpoint import load_checkpoint
from vista_plugin_local.config import LocalEngineConfig, validate_engine_config
from vista_plugin_local.metrics import plot_reward_success
from vista_plugin_local.policy import Policy, load_pretrained, pick_device
from vista_plugin_local.preflight import check_settings, plan
from vista_plugin_local.rl_step import FAILURES_FILE
from vista_plugin_local.rollouts import TrainingRollouts
from vista_plugin_local.run_dir import prepare_run_dir, write_results
from vista_plugin_local.samples import SampleBatch
from vista_plugin_local.session import EngineState, StepHook, TrainingError, TrainingSession
from vista_plugin_local.sft_stage import sft_examples
from vista_rl import RunLoggers, RunStatus, VistaError
from vista_rl.config import RunConfig
from vista_rl.engine_contract import EnginePlan

__all__ = ["FAILURES_FILE", "EngineState", "LocalEngine", "StepHook", "TrainingError", "build_policy"]


def build_policy(run: RunConfig, config: LocalEngineConfig, device: torch.device) -> Policy:
    """``run.model`` as the policy the local engine trains: a value head when the estimator needs a
    critic, the precision, static decode and LoRA adapters of ``engine_config.local``, and ``rollout.image_size`` for
    the encoder, so recorded images (the SFT stage's) are shown at the size every rollout shows."""
    model, processor = load_pretrained(run.model.path)
    local = config.local
    policy = Policy(model, processor, device, value_head=config.algorithm.uses_critic,
                    precision=local.precision, image_size=run.rollout.image_size, static_decode=local.static_decode)
    if local.lora.enabled:
        policy.enable_lora(local.lora)
    return policy


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
        self.device = pick_device(self.config.local.device)
        #: One training sequence per turn (``rollout.sequences``), e.g. for ``window_size: 0``.
        self.per_turn = run.rollout.per_turn_sequences
        #: The latest :meth:`run`'s session (its policy and last batch stay readable after the run).
        self.session: TrainingSession | None = None
        check_settings(run)

    def validate(self) -> EnginePlan:
        """Check what can be checked before training, writing nothing (the ``vista_rl.Engine`` contract):
        the run directory, the model directory, the estimator and its parameters, SFT data, device."""
        return plan(self.run_config, self.config, self.device, self.run_dir, self.resuming)

    @property
    def policy(self) -> Policy:
        """The policy being trained (from the moment :meth:`run` has built it)."""
        if self.session is None:
            raise VistaError("the local engine has no policy before run() builds it")
        return self.session.policy

    @property
    def last_batch(self) -> SampleBatch | None:
        """The latest RL step's episodes (tests and step hooks inspect it); None before the first."""
        return self.session.last_batch if self.session is not None else None

    def _build_policy(self) -> Policy:
        return build_policy(self.run_config, self.config, self.device)

    def _sft_examples(self) -> list[EpisodeTokens]:
        return sft_examples(self.run_config, self.policy.encoder, self.per_turn, self.console)

    # ---------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Run every remaining stage; returns the results summary (also in ``results.json``)."""
        prepare_run_dir(self.run_dir, self.run_config, self.resuming)
        torch.manual_seed(self.run_config.seed)
        random.seed(self.run_config.seed)
        np.random.seed(self.run_config.seed % 2**32)
        # Read (and, for a pickle or foreign file, refuse) the checkpoint before any other work.
        checkpoint: dict[str, Any] | None = load_checkpoint(self.run_dir) if self.resuming else None
        policy = self._build_policy()
        with TrainingRollouts.open(policy, self.run_config) as rollouts:
            # Every tracker in trainer.loggers gets the same records and config; none can stop the run.
            loggers = RunLoggers(self.run_config.trainer.loggers)
            loggers.start(self.run_dir, self.run_config.model_dump(mode="json"))
            status: RunStatus = "failed"
            try:
                self.session = session = TrainingSession(
                    run=self.run_config, config=self.config, run_dir=self.run_dir, policy=policy,
                    rollouts=rollouts, loggers=loggers, progress=self._progress(), console=self.console,
                    state=self._restore(policy, checkpoint), checkpoint=checkpoint,
                    sft_examples=self._sft_examples, step_hook=self.step_hook)
                session.run()
                status = "completed"
            except KeyboardInterrupt:
                status = "interrupted"
                raise
            finally:
                loggers.finish(status)
        return self._finish(session.state, loggers)

    def _restore(self, policy: Policy, checkpoint: dict[str, Any] | None) -> EngineState:
        """The state to start from: a fresh one, or the checkpoint's (its weights loaded into ``policy``)."""
        if checkpoint is None:
            return EngineState()
        state = EngineState(**checkpoint["engine"])
        policy.load_state(checkpoint["policy"])
        self.console.print(f"resuming {self.run_dir} at stage {state.stage}, "
                           f"SFT step {state.sft_step}, RL step {state.rl_step}")
        return state

    def _progress(self) -> Progress:
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self.console,
                        transient=False, disable=not self.console.is_terminal)

    def _finish(self, state: EngineState, loggers: RunLoggers) -> dict[str, Any]:
        plot = plot_reward_success(self.run_dir)
        summary = {"run_dir": str(self.run_dir), "env": self.run_config.env.id,
                   "estimator": self.config.algorithm.estimator, "evals": state.evals,
                   "nan_steps": state.nan_steps, "plot": str(plot) if plot else None,
                   "loggers": loggers.report()}
        write_results(self.run_dir, summary)
        return summary

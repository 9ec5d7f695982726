"""The ``local`` engine: one process, one device, a transformers VLM trained on its own rollouts.

Stages: evaluate the untrained model, SFT on oracle (or recorded) trajectories, evaluate, then RL
(GRPO, or PPO with a value head for the GAE family), evaluating on held-out seeds along the way.

Every rollout (SFT oracle data, RL steps, evaluation) goes through the core ``RolloutEngine``, the
same per-turn path ``vista eval`` uses: tools, reflection, context windows, timeouts, remote and Ray
envs all behave in training as in evaluation.  The policy is a backend (``PolicyBackend``) that
returns the sampled ids, their log-probs and the image tensors, and RL trains on each trajectory's
``token_view``.  An episode whose env, tool or model call failed is recorded (``failures.jsonl``)
and left out of the update; the step goes on.
Every stage is resumable: a checkpoint holds the weights, optimizer, scheduler, RNG states and the
position in the data, and ``vista train --resume RUN_DIR`` continues exactly where it stopped.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import vista_rl
from vista_plugin_local.advantages import (
    build_advantage_batch,
    compute_advantages,
    make_estimator,
    per_turn_advantages,
)
from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from vista_plugin_local.config import LocalEngineConfig, validate_engine_config
from vista_plugin_local.evaluate import EvalResult, evaluate
from vista_plugin_local.losses import Denominators, aggregate, clipped_policy_loss, kl_k3, value_loss
from vista_plugin_local.metrics import append_jsonl, plot_reward_success
from vista_plugin_local.policy import Policy, autocast_dtype, load_pretrained, micro_batches, pick_device
from vista_plugin_local.policy_backend import PolicyBackend
from vista_plugin_local.samples import SampleBatch, TrainSample, training_samples
from vista_plugin_local.sft_data import examples_from_turns, load_jsonl, trajectory_pieces
from vista_rl import (
    ConfigError,
    Env,
    RunLoggers,
    RunStatus,
    SamplingParams,
    Trajectory,
    VistaError,
    check_estimator_config,
    check_loggers,
    host,
)
from vista_rl.config import RunConfig
from vista_rl.engine_contract import EnginePlan
from vista_rl.rollout import EpisodeSpec, RolloutEngine, episode_specs
from vista_rl.store import versions as store_versions

RESULTS_FILE = "results.json"
#: Episodes left out of an update (env/tool/model failure), one JSON line each with the reason.
FAILURES_FILE = "failures.jsonl"
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
        self.last_batch: SampleBatch | None = None
        self.device = pick_device(self.config.trainer.device)
        #: One training sequence per turn (``rollout.sequences``), e.g. for ``window_size: 0``.
        self.per_turn = run.rollout.per_turn_sequences
        self._check_env()
        if run.rollout.sampling.stop:
            raise ConfigError("rollout.sampling.stop: the local engine ends a turn at <|im_end|> and does not "
                              "support stop strings; remove them")

    # ---------------------------------------------------------------- set-up
    def _check_env(self) -> None:
        try:
            host().spec("envs", self.run_config.env.id)
        except vista_rl.UnknownItemError as exc:
            raise ConfigError(f"env.id: {exc}") from None

    def make_env(self) -> Env:
        return vista_rl.make_env(self.run_config.env.id, **self.run_config.env.config)

    def validate(self) -> EnginePlan:
        """Check what can be checked before training, writing nothing (the ``vista_rl.Engine`` contract):
        the run directory, the model directory, the estimator and its parameters, SFT data, device."""
        self._check_run_dir()
        path = self.run_config.model.path
        if not path:
            raise ConfigError("model.path: the local engine needs a model directory (set model.path)")
        if not (Path(path) / "config.json").is_file():
            raise ConfigError(f"model.path: {path} is not a saved transformers model (no config.json there); "
                              "create a tiny one with `vista model init-tiny OUT_DIR` or point to a checkpoint")
        cfg = self.config
        check_loggers(self.run_config.trainer.loggers)
        if cfg.trainer.steps:
            check_estimator_config(self.run_config.algorithm)
            if self.per_turn and cfg.algorithm.uses_value_head:
                raise ConfigError(f"algorithm.estimator: {cfg.algorithm.estimator} needs a value per token of one "
                                  "sequence, but rollout.sequences gives one sequence per turn; use an estimator "
                                  "without a critic (grpo, rloo, ...) or rollout.sequences: episode")
        if cfg.sft.steps and cfg.sft.source == "jsonl" and not Path(str(cfg.sft.path)).is_file():
            raise ConfigError(f"sft.path: {cfg.sft.path} does not exist; record trajectories first or use "
                              "sft.source: oracle")
        autocast_dtype(cfg.trainer.precision, self.device)
        rollout = self.run_config.rollout
        stages = []
        if cfg.eval.at_start:
            stages.append("evaluate the untrained model")
        if cfg.sft.steps:
            stages.append(f"SFT {cfg.sft.steps} steps on {cfg.sft.source} data (lr {cfg.sft.lr:g})")
        if cfg.trainer.steps:
            stages.append(f"RL {cfg.trainer.steps} steps of {cfg.trainer.seeds_per_step} seeds x "
                          f"{rollout.group_size} samples, {cfg.algorithm.estimator}"
                          f"{' + value head' if cfg.algorithm.uses_value_head else ''} (lr {cfg.trainer.lr:g})")
        stages.append(f"evaluate on {cfg.eval.seeds.count} held-out seeds")
        return EnginePlan(engine="local", details=f"device {self.device}; " + "; then ".join(stages))

    def _specs(self, seeds: list[int], group_size: int) -> list[EpisodeSpec]:
        return episode_specs(self.run_config.env.id, seeds, group_size, self.run_config.env.config)

    def _open_rollouts(self) -> None:
        """One rollout path: training and evaluation drive the core ``RolloutEngine`` through the
        in-memory policy (``PolicyBackend``), with the run's rollout settings."""
        rollout = self.run_config.rollout
        self.backend = PolicyBackend(self.policy)
        self.rollout = RolloutEngine(self.backend, rollout, seed=self.run_config.seed)
        eval_settings = rollout.model_copy(update={"batch_size": self.config.eval.batch_size})
        self.eval_rollout = RolloutEngine(self.backend, eval_settings, seed=self.run_config.seed)

    def _close_rollouts(self) -> None:
        for name in ("rollout", "eval_rollout"):
            engine = getattr(self, name, None)
            if engine is not None:
                engine.close()

    def _check_run_dir(self) -> None:
        if self.resuming:
            if not self.run_dir.is_dir():
                raise VistaError(f"--resume {self.run_dir}: no such run directory")
            return
        if latest_checkpoint(self.run_dir) is not None:
            raise VistaError(f"{self.run_dir} already holds a run with checkpoints; continue it with "
                             f"`vista train --resume {self.run_dir}` or choose another output_dir "
                             "(--set output_dir=...)")

    def _prepare_run_dir(self) -> None:
        self._check_run_dir()
        if self.resuming:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(self.run_config.model_dump(), sort_keys=False))
        versions = {"vista-rl": store_versions()["vista-rl"], "torch": torch.__version__,
                    "plugins": {p.name: f"{p.distribution} {p.version}" for p in host().plugins() if not p.builtin}}
        try:
            import transformers

            versions["transformers"] = transformers.__version__
        except ImportError:  # pragma: no cover - the engine needs it to load a model anyway
            pass
        (self.run_dir / "versions.json").write_text(json.dumps(versions, indent=2))

    def _build_policy(self) -> Policy:
        if not self.run_config.model.path:
            raise ConfigError("model.path: the local engine needs a model directory (set model.path)")
        model, processor = load_pretrained(self.run_config.model.path)
        algorithm = self.config.algorithm
        policy = Policy(model, processor, self.device, value_head=algorithm.uses_value_head,
                        precision=self.config.trainer.precision, image_size=self.config.trainer.image_size)
        if self.config.lora.enabled:
            policy.enable_lora(self.config.lora)
        return policy

    # ------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Run every remaining stage; returns the results summary (also in ``results.json``)."""
        self._prepare_run_dir()
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
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
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
            path = self._save("interrupt")
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

    # ------------------------------------------------------------------- SFT
    def _sft_examples(self) -> list[EpisodeTokens]:
        sft = self.config.sft
        if sft.source == "jsonl":
            assert sft.path is not None
            examples, report = load_jsonl(Path(sft.path), self.policy.encoder, self.per_turn,
                                          self.run_config.rollout.window_size)
            self.console.print(f"SFT data {sft.path}: {report.summary()}")
            return examples
        oracle = vista_rl.make_model("scripted", path="oracle")
        with RolloutEngine(oracle, self.run_config.rollout, seed=self.run_config.seed) as engine:
            trajectories = engine.run(self._specs(sft.seeds.seeds(), 1))
        succeeded = [trajectory for trajectory in trajectories if trajectory.success and not trajectory.failure]
        failed = sum(1 for trajectory in trajectories if trajectory.failure)
        if not succeeded:
            raise VistaError(f"the oracle of {self.run_config.env.id} solved none of the SFT seeds; "
                             "check the env's oracle_response()")
        examples = [example for trajectory in succeeded
                    for example in examples_from_turns(trajectory.system_prompt, trajectory_pieces(trajectory),
                                                       self.policy.encoder, self.per_turn,
                                                       self.run_config.rollout.window_size)]
        self.console.print(f"SFT data: {len(succeeded)} oracle trajectories that succeeded "
                           f"(of {len(trajectories)} seeds" + (f"; {failed} failed with errors" if failed else "")
                           + (f"), {len(examples)} per-turn examples" if self.per_turn else ")"))
        return examples

    def _sft_batches(self, count: int, epoch: int) -> list[list[int]]:
        """Batch order of one epoch: a permutation seeded by (run seed, epoch), so the data position
        is just the step number."""
        generator = torch.Generator().manual_seed(self.run_config.seed * 1_000_003 + epoch)
        order = torch.randperm(count, generator=generator).tolist()
        size = self.config.sft.batch_size
        return [order[start:start + size] for start in range(0, count, size)]

    def _stage_sft(self, checkpoint: dict[str, Any] | None) -> None:
        sft = self.config.sft
        if self.state.stage != "sft":
            return
        if sft.steps == 0:
            self.state.stage = "rl"
            return
        examples = self._sft_examples()
        self._make_optimizer(sft.lr, sft.steps, warmup=0, scheduler="constant")
        if checkpoint is not None and checkpoint["engine"]["stage"] == "sft":
            self._restore_optimizer(checkpoint)
        task = self.progress.add_task("SFT", total=sft.steps, completed=self.state.sft_step, info="")
        batches_per_epoch = math.ceil(len(examples) / sft.batch_size)
        while self.state.sft_step < sft.steps:
            step = self.state.sft_step
            epoch, index = divmod(step, batches_per_epoch)
            batch = [examples[i] for i in self._sft_batches(len(examples), epoch)[index]]
            started = time.perf_counter()
            metrics = self._sft_update(batch)
            metrics.update(stage="sft", step=step + 1, global_step=self.state.global_step + 1,
                           seconds=time.perf_counter() - started)
            self.state.sft_step += 1
            self.loggers.log(metrics, metrics["global_step"])
            self._check_nan_limit()
            self.progress.update(task, advance=1, info=f"loss {metrics['loss']:.3f}")
            self._after_step("sft", self.state.sft_step)
        self._save("sft-end")
        self.policy.save_pretrained(self.run_dir / "models" / "sft")
        if self.config.eval.after_sft:
            self._evaluate("sft")
        self.state.stage = "rl"

    def _sft_update(self, batch: list[EpisodeTokens]) -> dict[str, Any]:
        assert self.optimizer is not None
        self.policy.train(True)
        self.optimizer.zero_grad(set_to_none=True)
        total_tokens = float(sum(sum(example.loss_mask) for example in batch))
        loss_sum = 0.0
        for chunk in micro_batches(batch, self.config.trainer.micro_batch_size):
            tensors = self.policy.collate(chunk, left_pad=False)
            scores = self.policy.score(tensors)
            loss = -(scores.logprobs * tensors["loss_mask"]).sum() / max(total_tokens, 1.0)
            loss.backward()
            loss_sum += float(loss.detach())
        grad_norm, finite = self._clip_and_check(self.config.sft.max_grad_norm, loss_sum)
        if finite:
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
        else:
            self._record_nan("sft", self.state.sft_step + 1)
        return {"loss": loss_sum, "grad_norm": grad_norm, "tokens": total_tokens, "nan_skipped": not finite}

    # -------------------------------------------------------------------- RL
    def _stage_rl(self, checkpoint: dict[str, Any] | None) -> None:
        trainer = self.config.trainer
        if self.state.stage != "rl":
            return
        if trainer.steps > 0:
            algorithm = self.config.algorithm
            self.estimator = make_estimator(algorithm.estimator, algorithm.estimator_params)
            if algorithm.kl_coef > 0:
                self.policy.make_reference()
            per_step = algorithm.ppo_epochs * algorithm.mini_batches
            self._make_optimizer(trainer.lr, trainer.steps * per_step, trainer.warmup_steps * per_step,
                                 trainer.scheduler)
            if checkpoint is not None and checkpoint["engine"]["stage"] == "rl":
                self._restore_optimizer(checkpoint)
            task = self.progress.add_task("RL", total=trainer.steps, completed=self.state.rl_step, info="")
            while self.state.rl_step < trainer.steps:
                metrics = self._rl_step()
                self.state.rl_step += 1
                self.loggers.log(metrics, metrics["global_step"])
                self._check_nan_limit()
                self.progress.update(task, advance=1, info=f"reward {metrics['reward_mean']:.2f} "
                                     f"success {metrics['success_rate']:.2f}")
                done = self.state.rl_step == trainer.steps
                if trainer.eval_every and self.state.rl_step % trainer.eval_every == 0 and not done:
                    self._evaluate(f"rl-step-{self.state.rl_step}")
                self._after_step("rl", self.state.rl_step)
        self.policy.save_pretrained(self.run_dir / "models" / "final")
        self._evaluate("rl" if trainer.steps > 0 else "final")
        self.state.stage = "done"
        self._save("final")

    def _step_seeds(self, step: int) -> list[int]:
        rng = random.Random(self.run_config.seed * 7_919 + step)
        return rng.sample(self.config.trainer.train_seeds.seeds(), self.config.trainer.seeds_per_step)

    def _rl_step(self) -> dict[str, Any]:
        rollout = self.run_config.rollout
        sampling = rollout.sampling
        step = self.state.rl_step
        started = time.perf_counter()
        self.backend.forget_images()
        self.rollout.sampling = SamplingParams(**sampling.model_dump(), n=1, seed=self.run_config.seed + step)
        trajectories = self.rollout.run(self._specs(self._step_seeds(step), rollout.group_size))
        batch = training_samples(trajectories, self.backend, self.per_turn)
        self.last_batch = batch  # the latest RL step's episodes (tests and step hooks inspect it)
        self.backend.forget_images()  # the samples hold the tensors they need
        t_rollout = time.perf_counter() - started
        self._record_dropped(batch.dropped)
        episodes = batch.samples
        generated = sum(int(t.metadata.get("generated_tokens", 0)) for t in trajectories)
        rewards = [trajectory.total_reward for trajectory in trajectories]
        metrics: dict[str, Any] = {
            "stage": "rl", "step": step + 1, "global_step": self.state.global_step + 1,
            "reward_mean": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
            "success_rate": float(np.mean([trajectory.success for trajectory in trajectories])),
            "turns_mean": float(np.mean([trajectory.num_turns for trajectory in trajectories])),
            "tool_calls_mean": float(np.mean([int(t.metadata.get("tool_calls", 0)) for t in trajectories])),
            "env_errors": sum(1 for trajectory in trajectories if trajectory.failure),
            "trained_episodes": len({id(episode.trajectory) for episode in episodes}),
            "trained_sequences": len(episodes),
            "lr": self.optimizer.param_groups[0]["lr"] if self.optimizer else 0.0,
        }
        if not episodes:
            self.console.print(f"[yellow]RL step {step + 1}: every episode failed; no update (see "
                               f"{FAILURES_FILE})[/yellow]")
            metrics.update(time_rollout_s=t_rollout, time_logprob_s=0.0, time_update_s=0.0, time_step_s=t_rollout,
                           gen_tokens_per_s=generated / max(t_rollout, 1e-9), tokens_per_s=0.0,
                           optimizer_steps=0, nan_skipped=False)
            return metrics

        started = time.perf_counter()
        reuse = self._old_logprobs_are_update_logprobs()
        old = {} if reuse else self._score_episodes(episodes, sampling.temperature)
        t_logprob = time.perf_counter() - started

        started = time.perf_counter()
        width = max(len(episode.tokens) for episode in episodes)
        if self.per_turn:
            advantages = per_turn_advantages(self.estimator, episodes, width)
            returns = torch.zeros_like(advantages)
        else:
            output = compute_advantages(self.estimator, build_advantage_batch(episodes, width, old.get("values")))
            advantages, returns = output.advantages, output.returns
        update = self._ppo_update(episodes, old, advantages, returns, sampling.temperature)
        t_update = time.perf_counter() - started

        trained_tokens = sum(len(episode.tokens) for episode in episodes)
        total_time = t_rollout + t_logprob + t_update
        metrics.update({
            "response_tokens_mean": float(np.mean([episode.response_tokens for episode in episodes])),
            "sequence_tokens_mean": float(np.mean([len(episode.tokens) for episode in episodes])),
            "time_rollout_s": t_rollout, "time_logprob_s": t_logprob, "time_update_s": t_update,
            "time_step_s": total_time,
            "gen_tokens_per_s": generated / max(t_rollout, 1e-9),
            "tokens_per_s": (trained_tokens + generated) / max(total_time, 1e-9),
        })
        metrics.update(update)
        return metrics

    def _record_dropped(self, dropped: list[tuple[Trajectory, str]]) -> None:
        """Failed episodes are part of the record, not a reason to stop: one line each."""
        for trajectory, reason in dropped:
            append_jsonl(self.run_dir / FAILURES_FILE, {
                "stage": "rl", "step": self.state.rl_step + 1, "env_id": trajectory.env_id, "seed": trajectory.seed,
                "sample_index": trajectory.sample_index, "reason": reason,
                "stop_reason": trajectory.metadata.get("stop_reason"), "turns": trajectory.num_turns})
        if dropped:
            self.console.print(f"[yellow]RL step {self.state.rl_step + 1}: {len(dropped)} episode(s) left out of "
                               f"the update ({dropped[0][1]}; all in {FAILURES_FILE})[/yellow]")

    def _old_logprobs_are_update_logprobs(self) -> bool:
        """One epoch over one mini-batch, no KL reference and no value head: the update's only
        forward runs the very policy that sampled, so its detached log-probs are the old log-probs
        (ratio 1) and a separate pass would compute the same numbers again."""
        algorithm = self.config.algorithm
        return (algorithm.ppo_epochs == 1 and algorithm.mini_batches == 1 and algorithm.kl_coef == 0
                and self.policy.value_head is None)

    @torch.no_grad()
    def _score_episodes(self, episodes: list[TrainSample], temperature: float) -> dict[str, torch.Tensor]:
        """Rollout-time log-probs (and reference log-probs and values) of every episode, padded."""
        self.policy.train(False)
        width = max(len(episode.tokens) for episode in episodes)
        wants_ref = self.config.algorithm.kl_coef > 0
        wants_values = self.policy.value_head is not None
        out: dict[str, list[torch.Tensor]] = {"logprobs": [], "ref_logprobs": [], "values": []}
        size = self.config.trainer.micro_batch_size
        with self.policy.shared_vision([episode.tokens for episode in episodes], size):
            for chunk in micro_batches(episodes, size):
                tensors = self.policy.collate([episode.tokens for episode in chunk], left_pad=False)
                scores = self.policy.score(tensors, temperature, values=wants_values)
                out["logprobs"].append(_pad(scores.logprobs, width))
                if scores.values is not None:
                    out["values"].append(_pad(scores.values, width))
                if wants_ref:
                    ref = self.policy.score(tensors, temperature, reference=True)
                    out["ref_logprobs"].append(_pad(ref.logprobs, width))
        return {key: torch.cat(parts).cpu() for key, parts in out.items() if parts}

    def _ppo_update(self, episodes: list[TrainSample], old: dict[str, torch.Tensor], advantages: torch.Tensor,
                    returns: torch.Tensor, temperature: float) -> dict[str, Any]:
        algorithm, trainer = self.config.algorithm, self.config.trainer
        assert self.optimizer is not None
        self.policy.train(True)
        sums: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0,
                                  "value_loss": 0.0, "grad_norm": 0.0}
        updates, skipped = 0, 0
        generator = torch.Generator().manual_seed(self.run_config.seed * 31 + self.state.rl_step)
        for _epoch in range(algorithm.ppo_epochs):
            order = torch.randperm(len(episodes), generator=generator).tolist()
            size = math.ceil(len(episodes) / algorithm.mini_batches)
            for start in range(0, len(order), size):
                rows = order[start:start + size]
                mask_all = torch.tensor([sum(episodes[r].tokens.loss_mask) for r in rows], dtype=torch.float32)
                denom = Denominators(tokens=float(mask_all.sum()), sequences=float(len(rows)))
                self.optimizer.zero_grad(set_to_none=True)
                parts: dict[str, float] = dict.fromkeys(sums, 0.0)
                with self.policy.shared_vision([episodes[r].tokens for r in rows], trainer.micro_batch_size):
                    for chunk in micro_batches(rows, trainer.micro_batch_size):
                        part = self._micro_loss(episodes, chunk, old, advantages, returns, temperature, denom)
                        for key, value in part.items():
                            parts[key] += value
                grad_norm, finite = self._clip_and_check(trainer.max_grad_norm, parts["loss"])
                if finite:
                    self.optimizer.step()
                    if self.scheduler is not None:
                        self.scheduler.step()
                else:
                    skipped += 1
                parts["grad_norm"] = grad_norm
                for key in sums:
                    sums[key] += parts[key]
                updates += 1
        if skipped:
            self._record_nan("rl", self.state.rl_step + 1)
        result: dict[str, Any] = {key: value / max(updates, 1) for key, value in sums.items()}
        result["nan_skipped"] = skipped > 0
        result["optimizer_steps"] = updates - skipped
        mask = build_advantage_batch(episodes, advantages.shape[1], None).response_mask
        result["advantage_mean"] = float((advantages * mask).sum() / mask.sum().clamp(min=1))
        if self.policy.value_head is None:
            result.pop("value_loss")
        return result

    def _micro_loss(self, episodes: list[TrainSample], rows: list[int], old: dict[str, torch.Tensor],
                    advantages: torch.Tensor, returns: torch.Tensor, temperature: float,
                    denom: Denominators) -> dict[str, float]:
        algorithm = self.config.algorithm
        tensors = self.policy.collate([episodes[r].tokens for r in rows], left_pad=False)
        width = tensors["input_ids"].shape[1]
        device = self.device
        mask = tensors["loss_mask"]
        pick = torch.tensor(rows)

        def take(tensor: torch.Tensor) -> torch.Tensor:
            return tensor[pick, :width].to(device)

        scores = self.policy.score(tensors, temperature, entropy=True, values=self.policy.value_head is not None)
        # Without an old-log-prob pass the policy has not moved since the rollout: ratio 1.
        old_logprobs = take(old["logprobs"]) if "logprobs" in old else scores.logprobs.detach()
        pg, clipped = clipped_policy_loss(scores.logprobs, old_logprobs, take(advantages),
                                          algorithm.clip_ratio_low, algorithm.clip_ratio_high)
        mode = algorithm.loss_agg
        pg_loss = aggregate(pg, mask, mode, denom)
        assert scores.entropy is not None
        entropy = aggregate(scores.entropy, mask, mode, denom)
        loss = pg_loss - algorithm.entropy_coef * entropy
        kl_value = torch.zeros(())
        if "ref_logprobs" in old:
            kl_value = aggregate(kl_k3(scores.logprobs, take(old["ref_logprobs"])), mask, mode, denom)
            loss = loss + algorithm.kl_coef * kl_value
        elif algorithm.kl_coef == 0:
            with torch.no_grad():  # report the policy's drift from the rollout policy instead
                kl_value = aggregate(kl_k3(scores.logprobs, old_logprobs), mask, mode, denom)
        v_loss = torch.zeros(())
        if scores.values is not None and "values" in old:
            v_loss = aggregate(value_loss(scores.values, take(old["values"]), take(returns), algorithm.value_clip),
                               mask, mode, denom)
            loss = loss + algorithm.value_coef * v_loss
        loss.backward()
        return {"loss": float(loss.detach()), "pg_loss": float(pg_loss.detach()), "kl": float(kl_value.detach()),
                "entropy": float(entropy.detach()), "value_loss": float(v_loss.detach()),
                "clip_fraction": float(aggregate(clipped, mask, mode, denom).detach())}

    # -------------------------------------------------------------- helpers
    def _make_optimizer(self, lr: float, total_steps: int, warmup: int, scheduler: str) -> None:
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr, betas=self.config.trainer.betas,
                                           weight_decay=self.config.trainer.weight_decay)
        total = max(total_steps, 1)

        def factor(step: int) -> float:
            if warmup and step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(total - warmup, 1))
            if scheduler == "linear":
                return 1.0 - progress
            if scheduler == "cosine":
                return 0.5 * (1.0 + math.cos(math.pi * progress))
            return 1.0

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    def _restore_optimizer(self, checkpoint: dict[str, Any]) -> None:
        assert self.optimizer is not None and self.scheduler is not None
        if checkpoint.get("optimizer") is not None:
            self.optimizer.load_state_dict(checkpoint["optimizer"])
        if checkpoint.get("scheduler") is not None:
            self.scheduler.load_state_dict(checkpoint["scheduler"])
        set_rng_state(checkpoint["rng"])

    def _clip_and_check(self, max_norm: float | None, loss: float) -> tuple[float, bool]:
        params = [p for p in self.policy.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
        finite = math.isfinite(loss) and bool(torch.isfinite(norm))
        if not finite:
            self.optimizer.zero_grad(set_to_none=True) if self.optimizer else None
        return float(norm), finite

    def _record_nan(self, stage: str, step: int) -> None:
        self.state.nan_steps.append(self.state.global_step + 1)
        self.console.print(f"[yellow]{stage} step {step}: non-finite loss or gradient; update skipped "
                           f"({len(self.state.nan_steps)} so far)[/yellow]")

    def _check_nan_limit(self) -> None:
        """Called after the step's metrics are written, so the record shows every skipped step."""
        if len(self.state.nan_steps) >= self.config.trainer.max_nan_steps:
            path = self._save("nan-stop")
            raise TrainingError(
                f"stopped after {len(self.state.nan_steps)} non-finite steps (global steps {self.state.nan_steps}); "
                f"a checkpoint of this point is in {path} (no update was applied on those steps). Lower the learning rate (trainer.lr / sft.lr), keep "
                "trainer.max_grad_norm set, or raise engine_config.local.max_nan_steps")

    def _after_step(self, stage: str, step: int) -> None:
        every = self.config.trainer.checkpoint_every
        if every and step % every == 0:
            self._save(f"{stage}-{step}")
        if self.step_hook is not None:
            self.step_hook(stage, step)

    def _save(self, _reason: str) -> Path:
        state = {
            "engine": asdict(self.state),
            "policy": self.policy.state(),
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": rng_state(),
        }
        name = f"step-{self.state.global_step:06d}"
        return save_checkpoint(self.run_dir, name, state, self.config.trainer.keep_checkpoints)

    def _evaluate(self, label: str) -> EvalResult:
        eval_cfg, rollout = self.config.eval, self.run_config.rollout
        task = self.progress.add_task(f"eval {label}", total=None, info=f"{eval_cfg.seeds.count} held-out seeds")
        sampling = SamplingParams(**{**rollout.sampling.model_dump(), "temperature": eval_cfg.temperature},
                                  n=1, seed=self.run_config.seed)
        self.backend.keep_images = False  # evaluation trains nothing: hold no tensors
        try:
            result = evaluate(self.eval_rollout, self._specs(eval_cfg.seeds.seeds(), 1), sampling, label,
                              seed=self.run_config.seed)
        finally:
            self.backend.keep_images = True
            self.backend.forget_images()
        self.progress.update(task, total=1, completed=1, info=f"success {result.success}")
        record = result.to_dict()
        record.update(stage="eval", rl_step=self.state.rl_step, sft_step=self.state.sft_step,
                      global_step=self.state.global_step)
        self.loggers.log(record, self.state.global_step)
        self.state.evals[label] = record
        self.console.print(f"eval [bold]{label}[/bold]: success {result.success} reward {result.reward} "
                           f"({result.episodes} held-out episodes)")
        return result

    def _finish(self) -> dict[str, Any]:
        plot = plot_reward_success(self.run_dir)
        summary = {"run_dir": str(self.run_dir), "env": self.run_config.env.id,
                   "estimator": self.config.algorithm.estimator, "evals": self.state.evals,
                   "nan_steps": self.state.nan_steps, "plot": str(plot) if plot else None,
                   "loggers": self.loggers.report()}
        (self.run_dir / RESULTS_FILE).write_text(json.dumps(summary, indent=2))
        return summary


def _pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    if tensor.shape[1] >= width:
        return tensor[:, :width]
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]))

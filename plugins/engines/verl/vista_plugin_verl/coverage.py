"""Where every run-config key goes on the verl engine: mapped, refused, or changing nothing verl trains.

One run config serves every engine, so a key the verl engine neither maps nor refuses would be trained
differently without a word (a misspelt ``engine_config.local.devise``, a LoRA rank nobody reads, a
micro-batch quietly clamped).  These tables name each key's treatment; ``config.check_neutral`` and
``config.compose_overrides`` implement them, and ``tests/test_verl_coverage.py`` walks every field of
``RunConfig`` (and of the local engine's section) and checks, by changing each key, that it lands in
verl's config or the dataset rows, is refused naming the key, or is named in a warning.

A key can be in :data:`MAPPED` and :data:`REFUSED` both: mapped for some values, refused for others
(``trainer.scheduler``: constant and cosine map, linear is refused).
"""

from __future__ import annotations

#: Run-config key -> where verl gets it.  "rows" are the parquet rows' ``extra_info``; every ``rollout.*``
#: key travels there once, in the validated ``RolloutSection`` (``dataset.env_rows``), which the agent
#: loop's episode driver reads as ``RolloutEngine`` does.
MAPPED: dict[str, str] = {
    "engine": "selects this engine",
    "seed": "data.seed; each step's train seeds (vista_rl.step_seeds)",
    "output_dir": "trainer.default_local_dir, the loggers' directories, the datasets",
    "env.id": "rows: extra_info.env_id",
    "env.config": "rows: extra_info.env_config",
    "model.path": "actor_rollout_ref.model.path (and critic.model.path)",
    "rollout.max_turns": "rows (the episode driver ends the episode there, as locally)",
    "rollout.group_size": "actor_rollout_ref.rollout.n",
    "rollout.reflection": "rows",
    "rollout.reflection_attempts": "rows",
    "rollout.env_timeout_s": "rows",
    "rollout.tool_timeout_s": "rows",
    "rollout.tool_response_role": "rows",
    "rollout.describe_tools": "rows",
    "rollout.tools": "rows",
    "rollout.sampling.temperature": "actor_rollout_ref.rollout.temperature",
    "rollout.sampling.top_p": "actor_rollout_ref.rollout.top_p",
    "rollout.window_size": "rows: the episode driver's window; per-turn rows (a list of AgentLoopOutput)",
    "rollout.sequences": "rows: one training row per turn, or per episode",
    "rollout.max_context_tokens": "rows: the episode driver stops the episode at the budget, as locally",
    "rollout.image_size": "rows: the episode driver resizes each observation image, as for the local engine",
    "engine_config.local.image_size": "rollout.image_size (the deprecated name: RunConfig moves it there)",
    "rollout.sampling.max_tokens": "rows: each generate call's sampling params (max_tokens)",
    "rollout.sampling.stop": "rows: each generate call's sampling params (stop)",
    "algorithm.turn_credit": "algorithm.vista_turn_credit: the advantage bridge over per-turn rows",
    "algorithm.estimator": "algorithm.adv_estimator = vista_<id> (our estimator in verl's registry)",
    "algorithm.estimator_params": "algorithm.gamma / lam, the rest algorithm.vista_params.*",
    "algorithm.clip_ratio_low": "actor.clip_ratio_low",
    "algorithm.clip_ratio_high": "actor.clip_ratio_high",
    "algorithm.kl_coef": "actor.use_kl_loss, kl_loss_coef (low_var_kl: k3)",
    "algorithm.entropy_coef": "actor.entropy_coeff",
    "algorithm.loss_agg": "actor/critic.loss_agg_mode",
    "algorithm.ppo_epochs": "actor/critic.ppo_epochs",
    "algorithm.mini_batches": "actor/critic.ppo_mini_batch_size",
    "algorithm.critic": "critic.enable",
    "algorithm.value_clip": "critic.cliprange_value",
    "trainer.steps": "trainer.total_training_steps",
    "trainer.seeds_per_step": "data.train_batch_size",
    "trainer.train_seeds.start": "the train rows: each step's seeds as vista_rl.step_seeds draws them",
    "trainer.train_seeds.count": "the train rows: each step's seeds as vista_rl.step_seeds draws them",
    "trainer.lr": "actor.optim.lr",
    "trainer.weight_decay": "actor/critic.optim.weight_decay",
    "trainer.betas": "actor.optim.betas",
    "trainer.warmup_steps": "actor.optim.lr_warmup_steps",
    "trainer.scheduler": "actor.optim.lr_scheduler_type (constant, cosine)",
    "trainer.micro_batch_size": "ppo_micro_batch_size_per_gpu (at most one GPU's share; a warning says when less)",
    "trainer.max_grad_norm": "actor/critic.grad_clip",
    "trainer.checkpoint_every": "trainer.save_freq",
    "trainer.keep_checkpoints": "trainer.max_actor_ckpt_to_keep, max_critic_ckpt_to_keep",
    "trainer.eval_every": "trainer.test_freq",
    "trainer.loggers": "trainer.logger, trainer.project_name / experiment_name and each logger's options",
    "eval.seeds.start": "the val rows",
    "eval.seeds.count": "the val rows",
    "eval.temperature": "actor_rollout_ref.rollout.val_kwargs.temperature, do_sample",
    "eval.at_start": "trainer.val_before_train; with an SFT stage, a trainer.val_only run of the untrained model",
    "eval.after_sft": "trainer.val_before_train of RL after the SFT stage",
    "sft.steps": "verl's SFT trainer (verl.trainer.sft_trainer) for that many steps, then RL from its model",
    "sft.source": "oracle: the SFT rows",
    "sft.seeds.start": "the SFT rows (the oracle's episodes on sft.seeds)",
    "sft.seeds.count": "the SFT rows (the oracle's episodes on sft.seeds)",
    "sft.batch_size": "SFT data.train_batch_size",
    "sft.lr": "SFT optim.lr",
    "sft.warmup_steps": "SFT optim.lr_warmup_steps",
    "sft.scheduler": "SFT optim.lr_scheduler_type (constant, cosine)",
    "sft.max_grad_norm": "SFT optim.clip_grad",
    "sft.keep_failed": "the SFT rows (which of the oracle's episodes they hold)",
    "engine_config.local.precision": "FSDP mixed precision (param dtype) and rollout.dtype",
    "engine_config.local.lora.enabled": "actor_rollout_ref.model.lora_rank (0: off)",
    "engine_config.local.lora.r": "actor_rollout_ref.model.lora_rank",
    "engine_config.local.lora.alpha": "actor_rollout_ref.model.lora_alpha",
    "engine_config.local.lora.target_modules": "actor_rollout_ref.model.target_modules",
    "engine_config.verl.critic_lr": "critic.optim.lr",
    "engine_config.verl.cluster.n_gpus_per_node": "trainer.n_gpus_per_node",
    "engine_config.verl.cluster.nnodes": "trainer.nnodes",
    "engine_config.verl.cluster.rollout_backend": "actor_rollout_ref.rollout.name",
    "engine_config.verl.cluster.tensor_parallel_size": "rollout.tensor_model_parallel_size",
    "engine_config.verl.cluster.gpu_memory_utilization": "rollout.gpu_memory_utilization",
    "engine_config.verl.cluster.max_prompt_length": "data.max_prompt_length, rollout.prompt_length",
    "engine_config.verl.cluster.max_response_length": "data.max_response_length, rollout.response_length",
    "engine_config.verl.overrides": "raw Hydra overrides, applied last",
    "engine_config.verl.sft_overrides": "raw Hydra overrides of verl's SFT trainer, applied last",
    "engine_config.verl.python": "the interpreter of the command",
}

#: Run-config key -> when the verl engine refuses it (an error naming the key and what to change).
#: Keys refused as part of a stage name that stage's switch (``sft.steps``).
REFUSED: dict[str, str] = {
    "model.config": "non-empty: the local backend's options do not reach verl's model loader",
    "rollout.window_size": "above 0 with one sequence per episode (a concatenation the model never saw)",
    "rollout.sequences": "turn, with verl's legacy trainer (trainer.use_v1=false: one output per sample)",
    "trainer.scheduler": "linear: verl schedules constant or cosine",
    "trainer.micro_batch_size": "not a divisor of one GPU's share of a mini-batch",
    "algorithm.mini_batches": "not a divisor of trainer.seeds_per_step",
    "algorithm.estimator": "unregistered",
    "algorithm.estimator_params": "a key the estimator does not take",
    "sft.source": "jsonl: the verl engine builds its SFT rows from the env's oracle only",
    "sft.path": "with sft.source: jsonl",
    "sft.scheduler": "linear: verl's SFT trainer schedules constant or cosine",
    "trainer.loggers": "a logger option verl's tracker has no key for",
    "engine_config.local.device": "cpu or cuda:N: verl places its workers on the cluster's GPUs",
    "engine_config.local.image_size": "set beside a different rollout.image_size (RunConfig refuses that first)",
    "engine_config.local.max_nan_steps": "not the default: verl does not skip non-finite steps",
    "engine_config.local.value_coef": "not the default, with a critic: verl's critic is its own model",
    "engine_config.local.lora.dropout": "> 0: verl's LoraConfig has no dropout "
                                        "(verl/workers/engine/fsdp/transformer_impl.py:358-366)",
}

#: Run-config key -> why it changes nothing verl trains (eval serving, local throughput, the local
#: engine's own memory layout).  Set to anything but its default, a warning names it.
NOT_TRAINED: dict[str, str] = {
    "model.backend": "the backend `vista eval` serves the model with; verl serves it with "
                     "engine_config.verl.cluster.rollout_backend",
    "rollout.episodes": "seeds per `vista eval` run; verl's validation uses eval.seeds",
    "rollout.batch_size": "episodes alive at once in the local engine; verl runs each step's episodes "
                          "concurrently on its agent-loop workers (actor_rollout_ref.rollout.agent.num_workers)",
    "rollout.max_workers": "the local engine's env/tool threads; the agent loop keeps its own pool per worker",
    "rollout.model_workers": "`vista eval`'s model workers",
    "rollout.model_worker_mode": "`vista eval`'s model workers",
    "rollout.model_worker_options": "`vista eval`'s model workers",
    "engine_config.local.packing": "the local update's memory layout (the same log-probs and gradients); verl "
                                   "packs with actor_rollout_ref.model.use_remove_padding",
    "engine_config.local.shared_prefix": "the local update's memory layout (the same log-probs and gradients)",
    "engine_config.local.static_decode": "the local sampler's KV cache (static or dynamic: the same greedy replies); "
                                         "verl samples with engine_config.verl.cluster.rollout_backend",
}

#: Keys that matter only when another setting is on: key -> overrides that turn it on (the coverage
#: test changes the key in that context).
CONTEXT: dict[str, tuple[str, ...]] = {
    "rollout.reflection_attempts": ("rollout.reflection=true",),
    "algorithm.turn_credit": ("rollout.window_size=0",),
    "algorithm.value_clip": ("algorithm.critic=true",),
    "engine_config.verl.critic_lr": ("algorithm.critic=true",),
    "engine_config.local.value_coef": ("algorithm.critic=true",),
    "engine_config.local.lora.r": ("engine_config.local.lora.enabled=true",),
    "engine_config.local.lora.alpha": ("engine_config.local.lora.enabled=true",),
    "engine_config.local.lora.dropout": ("engine_config.local.lora.enabled=true",),
    "engine_config.local.lora.target_modules": ("engine_config.local.lora.enabled=true",),
    "eval.after_sft": ("sft.steps=10", "sft.seeds.count=2"),
    "sft.source": ("sft.steps=10", "sft.path=p.jsonl", "sft.seeds.count=2"),
    "sft.path": ("sft.steps=10", "sft.source=jsonl", "sft.path=p.jsonl"),
    "sft.steps": ("sft.seeds.count=2",),
    "engine_config.verl.sft_overrides": ("sft.steps=10", "sft.seeds.count=2"),
    **{f"sft.{key}": ("sft.steps=10", "sft.seeds.count=2") for key in (
        "seeds.start", "batch_size", "lr", "warmup_steps", "scheduler", "max_grad_norm")},
    "sft.seeds.count": ("sft.steps=10", "sft.seeds.count=2"),
    # Only a teacher that fails some seeds has failed episodes to keep.
    "sft.keep_failed": ("sft.steps=10", "sft.seeds.count=16", "env.id=frozenlake/frozenlake-v0",
                        "env.config={teacher: hole_blind}"),
}


def treatment(key: str) -> list[str]:
    """The tables naming ``key`` (``mapped``, ``refused``, ``not trained``), for messages and tests."""
    return [name for name, table in (("mapped", MAPPED), ("refused", REFUSED), ("not trained", NOT_TRAINED))
            if key in table]

"""From our run config to verl's Hydra config, validated by verl's own loader.

``compose_overrides`` turns a ``RunConfig`` (+ its ``engine_config``, see ``VerlEngineConfig``) into
Hydra overrides for ``verl/trainer/config/ppo_trainer.yaml``; ``compose_verl_config`` composes them
with Hydra's compose API over verl's installed config directory and runs ``verl.utils.config.
validate_config`` (what ``verl.trainer.main_ppo`` runs first), so a bad combination fails here, on
the laptop, not after a GPU job has started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_verl import local_section
from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_plugin_verl.coverage import NOT_TRAINED
from vista_rl import ConfigError, check_estimator_config
from vista_rl.config import RunConfig, engine_section


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerlCluster(_Section):
    n_gpus_per_node: int = Field(8, ge=1)
    nnodes: int = Field(1, ge=1)
    rollout_backend: str = Field("vllm", description="vllm | sglang")
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.5, gt=0.0, le=1.0)
    max_prompt_length: int = Field(2048, ge=16)
    max_response_length: int = Field(2400, ge=16, description="all turns of an episode, observations included")


class VerlEngineConfig(_Section):
    """``engine_config.verl``: only what verl alone has.  The algorithm, optimizer, batch, step and
    seed settings come from the run config's engine-neutral sections (see :func:`compose_overrides`)."""

    critic_lr: float = Field(1e-5, gt=0.0, description="the critic is its own model in verl, with its own optimizer")
    cluster: VerlCluster = Field(default_factory=VerlCluster)
    overrides: list[str] = Field(default_factory=list, description="raw Hydra overrides, applied last")
    python: str | None = Field(None, description="interpreter that runs verl (default: this one)")


ENGINE_ID = "verl"
#: Our loss aggregations in verl's names (``seq-mean``: the mean over sequences of each one's token mean).
LOSS_AGG = {"token-mean": "token-mean", "seq-mean": "seq-mean-token-mean"}
#: verl's learning-rate schedules (``actor.optim.lr_scheduler_type``).
SCHEDULERS = {"constant": "constant", "cosine": "cosine"}
#: verl's marker of the last checkpoint in ``trainer.default_local_dir`` (``RUN_DIR/checkpoints``).
LATEST_CHECKPOINT = "latest_checkpointed_iteration.txt"
#: verl's ``file`` logger's output in the run directory (its own line format, not the local engine's metrics.jsonl).
VERL_METRICS_FILE = "verl_metrics.jsonl"
#: ``null`` (no clipping) for verl's ``grad_clip`` and ``critic.cliprange_value``, which always clip.
NO_CLIP = 1.0e9


def engine_config(run: RunConfig) -> VerlEngineConfig:
    """``engine_config.verl`` validated; errors name the full key (``engine_config.verl.cluster.nnodes``)."""
    return engine_section(run, ENGINE_ID, VerlEngineConfig)


def gpu_share(run: RunConfig, cfg: VerlEngineConfig) -> tuple[int, int]:
    """(sequences of one mini-batch on each GPU, GPUs): ``mini-batch seeds x rollout.n / GPUs``."""
    gpus = cfg.cluster.n_gpus_per_node * cfg.cluster.nnodes
    return run.trainer.seeds_per_step // run.algorithm.mini_batches * run.rollout.group_size // gpus, gpus


def micro_batch_per_gpu(run: RunConfig, cfg: VerlEngineConfig) -> int:
    """``trainer.micro_batch_size`` as verl's ``ppo_micro_batch_size_per_gpu``: at most one GPU's share
    of a mini-batch, which is what a larger value means locally too (one forward per mini-batch: the
    same gradient); verl's workers require the share to be a multiple of it.  :func:`check_neutral`
    says so in a warning when it takes the share."""
    share, _gpus = gpu_share(run, cfg)
    return min(run.trainer.micro_batch_size, share) if share else run.trainer.micro_batch_size


#: Run-config logger ids (``trainer.loggers``) -> verl's tracking backends (``trainer.logger``); verl's
#: ``file`` backend writes one JSON line a step, as our ``jsonl`` logger does.
LOGGERS = {"tensorboard": "tensorboard", "jsonl": "file", "wandb": "wandb", "mlflow": "mlflow",
           "swanlab": "swanlab", "clearml": "clearml"}


def loop_applies_sampling() -> bool:
    """Whether verl's dataset rows carry ``rollout.sampling`` to the agent loop, which then caps each
    reply at ``max_tokens`` and stops at ``stop`` as the local engine does (the contract between
    ``dataset.TURN_KEYS`` and the loop: the loop applies what the rows carry)."""
    from vista_plugin_verl.dataset import TURN_KEYS

    return "sampling" in TURN_KEYS


def trains_differently(run: RunConfig, cfg: VerlEngineConfig) -> list[str]:
    """Settings the verl engine would train differently from the local engine, one message each: the
    key, what verl would do instead, and what to change.  verl 0.9.1's trainer keeps one sample per
    (prompt, rollout) pair (``RayPPOTrainer.fit`` repeats the prompt batch ``rollout.n`` times and
    unions it with the agent loop's outputs), so an episode is always one sequence with the whole
    conversation in context: context windows and per-turn sequences cannot be honoured, only refused."""
    rollout, out = run.rollout, []
    if rollout.window_size is not None:
        out.append(f"rollout.window_size: {rollout.window_size} keeps only the last turns in context "
                   f"(one training sequence per turn), but verl trains each episode as one sequence with the "
                   f"whole conversation in context; set rollout.window_size: null to train whole conversations, "
                   f"or train this config with --engine local")
    elif rollout.sequences == "turn":
        out.append("rollout.sequences: turn trains one sequence per turn, but verl trains one sequence per "
                   "episode; set rollout.sequences: auto (or episode), or train with --engine local")
    if run.algorithm.turn_credit != "episode":
        out.append(f"algorithm.turn_credit: {run.algorithm.turn_credit} credits per-turn sequences, which verl "
                   "does not build; set algorithm.turn_credit: episode with rollout.window_size: null")
    if rollout.max_context_tokens is not None:
        out.append(f"rollout.max_context_tokens: verl does not trim the context to {rollout.max_context_tokens} "
                   "tokens; it bounds an episode by engine_config.verl.cluster.max_prompt_length and "
                   "max_response_length; set rollout.max_context_tokens: null and size those instead")
    budget = cfg.cluster.max_response_length
    if not loop_applies_sampling():
        if rollout.sampling.max_tokens < budget:
            one_turn = (f"engine_config.verl.cluster.max_response_length: {rollout.sampling.max_tokens} (the "
                        "same cap for a one-turn env) or " if rollout.max_turns == 1 else "")
            out.append(f"rollout.sampling.max_tokens: verl's agent loop does not cap a reply at "
                       f"{rollout.sampling.max_tokens} tokens (a reply may run to the episode's budget, "
                       f"engine_config.verl.cluster.max_response_length = {budget}); set "
                       f"{one_turn}rollout.sampling.max_tokens: {budget}")
        if rollout.sampling.stop:
            out.append("rollout.sampling.stop: verl's agent loop does not pass stop strings to its server; "
                       "set rollout.sampling.stop: []")
    if run.sft.steps:
        out.append(f"sft.steps: the local engine runs {run.sft.steps} SFT steps before RL, the verl engine none; "
                   "run the SFT stage first (vista train --engine local CONFIG --set trainer.steps=0), then "
                   "set model.path: RUN_DIR/models/sft and sft.steps: 0")
    if run.model.config:
        out.append(f"model.config: the local backend's model options ({', '.join(sorted(run.model.config))}) "
                   "do not reach verl, which loads model.path with actor_rollout_ref.model.*; set model.config: {} "
                   "and put verl's own keys in engine_config.verl.overrides")
    out += local_section.refusals(local_section.raw_section(run), run.algorithm.uses_critic)
    return out


def check_neutral(run: RunConfig, cfg: VerlEngineConfig | None = None) -> list[str]:
    """Neutral settings verl cannot honour raise ConfigError naming the key (all settings verl would
    train differently in one error, see :func:`trains_differently`); settings that only change what is
    logged come back as warnings."""
    trainer, algo = run.trainer, run.algorithm
    cfg = cfg or engine_config(run)
    local_section.raw_section(run)  # a misspelt engine_config.local key first, as the local engine would
    if trainer.steps < 1:
        raise ConfigError("trainer.steps: the verl engine trains only RL; set at least 1 step")
    if trainer.scheduler not in SCHEDULERS:
        raise ConfigError(f"trainer.scheduler: verl schedules {' or '.join(SCHEDULERS)}, not {trainer.scheduler!r}")
    if trainer.seeds_per_step % algo.mini_batches:
        raise ConfigError(f"algorithm.mini_batches: verl splits a step's {trainer.seeds_per_step} seeds "
                          f"(trainer.seeds_per_step) into equal mini-batches; {algo.mini_batches} does not divide it")
    share, gpus = gpu_share(run, cfg)
    if share and share % micro_batch_per_gpu(run, cfg):
        raise ConfigError(f"trainer.micro_batch_size: verl's workers need it to divide one GPU's share of a "
                          f"mini-batch ({share} sequences on {gpus} GPUs); {trainer.micro_batch_size} does not")
    check_estimator_config(algo)
    try:
        from vista_plugin_verl.estimators import verl_name

        verl_name(algo.estimator)
    except KeyError as exc:
        raise ConfigError(f"algorithm.estimator: {exc.args[0]}") from None
    different = trains_differently(run, cfg)
    if different:
        raise ConfigError("the verl engine would train this config differently from the local engine:\n  "
                          + "\n  ".join(different))
    out = not_trained_warnings(run) + local_section.warnings(local_section.raw_section(run))
    if share and trainer.micro_batch_size > share:
        out.append(f"trainer.micro_batch_size: {trainer.micro_batch_size} is more than one GPU's share of a "
                   f"mini-batch ({share} sequences on {gpus} GPUs), so verl's micro-batch is {share} (the same "
                   "gradient: one forward per mini-batch, as the local engine does)")
    unmapped = sorted({_logger_id(entry) for entry in trainer.loggers} - set(LOGGERS))
    if unmapped:
        out.append(f"trainer.loggers: verl has no {', '.join(unmapped)} logger; it logs to the console and "
                   f"{', '.join(sorted(verl_loggers(run)[1:])) or 'nothing else'}")
    return out


def not_trained_warnings(run: RunConfig) -> list[str]:
    """A warning for each run-config key set that changes nothing verl trains (``coverage.NOT_TRAINED``)."""
    defaults = RunConfig.model_validate({"env": {"id": run.env.id}})
    out = []
    for key, why in NOT_TRAINED.items():
        if key.startswith("engine_config."):
            continue  # local_section.warnings
        if _get(run, key) != _get(defaults, key):
            out.append(f"{key}: not used by verl ({why})")
    return out


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _logger_id(entry: str | dict[str, Any]) -> str:
    return entry if isinstance(entry, str) else str(entry["id"])


def verl_loggers(run: RunConfig) -> list[str]:
    """verl's ``trainer.logger``: the console, then each run-config logger verl also has."""
    out = ["console"]
    for entry in run.trainer.loggers:
        name = LOGGERS.get(_logger_id(entry))
        if name and name not in out:
            out.append(name)
    return out


def _q(value: Any) -> str:
    """A Hydra override value: strings quoted so paths and ids with ``/`` or ``=`` survive."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_q(item) for item in value) + "]"
    text = str(value)
    if text and all(ch.isalnum() or ch in "_./:-" for ch in text):
        return text
    return "'" + text.replace("'", "\\'") + "'"


def compose_overrides(run: RunConfig, cfg: VerlEngineConfig, train_file: str | Path, val_file: str | Path,
                      resume: bool = False) -> list[str]:
    """The run config as Hydra overrides of verl's ``ppo_trainer``: the neutral sections map onto
    verl's own keys, ``engine_config.verl`` adds the cluster, ``overrides`` come last.  ``resume``
    (``vista train --resume``) continues from the run directory's last checkpoint; otherwise verl starts
    afresh (its own default, ``auto``, would silently continue whatever checkpoint the directory holds)."""
    from vista_plugin_verl.estimators import verl_name

    if run.model.path is None:
        raise ConfigError("model.path: the verl engine needs a Hugging Face model path or id")
    algo, trainer, evaluation, cluster = run.algorithm, run.trainer, run.eval, cfg.cluster
    estimator = verl_name(algo.estimator)
    critic = algo.uses_critic
    sampling = run.rollout.sampling
    run_dir = Path(run.output_dir).resolve()
    mini_batch = trainer.seeds_per_step // algo.mini_batches
    micro = micro_batch_per_gpu(run, cfg)
    grad_clip = trainer.max_grad_norm if trainer.max_grad_norm is not None else NO_CLIP
    params = dict(algo.estimator_params)
    gamma, lam = params.pop("gamma", 1.0), params.pop("lam", 1.0)
    actor = "actor_rollout_ref.actor"
    out = [
        f"data.train_files={_q(str(train_file))}",
        f"data.val_files={_q(str(val_file))}",
        f"data.train_batch_size={trainer.seeds_per_step}",
        f"data.max_prompt_length={cluster.max_prompt_length}",
        f"data.max_response_length={cluster.max_response_length}",
        f"data.seed={run.seed}",
        "data.return_raw_chat=true",
        "data.return_multi_modal_inputs=false",
        "data.filter_overlong_prompts=false",
        f"actor_rollout_ref.model.path={_q(run.model.path)}",
        f"{actor}.optim.lr={algo_lr(trainer.lr)}",
        f"{actor}.optim.weight_decay={trainer.weight_decay!r}",
        f"{actor}.optim.betas=[{trainer.betas[0]!r},{trainer.betas[1]!r}]",
        f"{actor}.optim.lr_warmup_steps={trainer.warmup_steps if trainer.warmup_steps else -1}",
        f"{actor}.optim.lr_scheduler_type={SCHEDULERS[trainer.scheduler]}",
        f"{actor}.ppo_mini_batch_size={mini_batch}",
        f"{actor}.ppo_micro_batch_size_per_gpu={micro}",
        f"{actor}.ppo_epochs={algo.ppo_epochs}",
        f"{actor}.clip_ratio_low={algo.clip_ratio_low!r}",
        f"{actor}.clip_ratio_high={algo.clip_ratio_high!r}",
        f"{actor}.entropy_coeff={algo.entropy_coef!r}",
        f"{actor}.loss_agg_mode={LOSS_AGG[algo.loss_agg]}",
        f"{actor}.grad_clip={grad_clip!r}",
        f"{actor}.use_kl_loss={_q(algo.kl_coef > 0)}",
        f"{actor}.kl_loss_coef={algo.kl_coef!r}",
        f"{actor}.kl_loss_type=low_var_kl",  # k3, the local engine's estimator
        f"actor_rollout_ref.rollout.name={cluster.rollout_backend}",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={run.rollout.group_size}",
        f"actor_rollout_ref.rollout.temperature={sampling.temperature!r}",
        f"actor_rollout_ref.rollout.top_p={sampling.top_p!r}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={evaluation.temperature!r}",
        f"actor_rollout_ref.rollout.val_kwargs.do_sample={_q(evaluation.temperature > 0)}",
        f"actor_rollout_ref.rollout.prompt_length={cluster.max_prompt_length}",
        f"actor_rollout_ref.rollout.response_length={cluster.max_response_length}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={cluster.tensor_parallel_size}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={cluster.gpu_memory_utilization!r}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={run.rollout.max_turns}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        f"algorithm.adv_estimator={estimator}",
        f"algorithm.gamma={gamma!r}",
        f"algorithm.lam={lam!r}",
        f"critic.enable={_q(critic)}",
        f"trainer.total_training_steps={trainer.steps}",
        # local: 0 = only at the end; verl: every N steps and at the last one
        f"trainer.test_freq={trainer.eval_every or trainer.steps}",
        f"trainer.save_freq={trainer.checkpoint_every or trainer.steps}",
        f"trainer.max_actor_ckpt_to_keep={trainer.keep_checkpoints}",
        f"trainer.max_critic_ckpt_to_keep={trainer.keep_checkpoints}",
        f"trainer.val_before_train={_q(evaluation.at_start)}",
        f"trainer.n_gpus_per_node={cluster.n_gpus_per_node}",
        f"trainer.nnodes={cluster.nnodes}",
        f"trainer.default_local_dir={_q(str(run_dir / 'checkpoints'))}",
        f"trainer.resume_mode={'auto' if resume else 'disable'}",
        "trainer.project_name=vista",
        f"trainer.experiment_name={_q(run_dir.name)}",
        f"trainer.logger={_q(verl_loggers(run))}",
        # verl's loggers write under the working directory unless told; the run directory instead, on
        # every node (the TaskRunner that logs is a Ray actor: the env travels in the runtime env)
        f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={_q(str(run_dir / 'tensorboard'))}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={_q(str(run_dir / VERL_METRICS_FILE))}",
    ]
    if critic:
        out += [
            f"critic.model.path={_q(run.model.path)}",
            f"critic.optim.lr={algo_lr(cfg.critic_lr)}",
            f"critic.optim.weight_decay={trainer.weight_decay!r}",
            f"critic.ppo_mini_batch_size={mini_batch}",
            f"critic.ppo_micro_batch_size_per_gpu={micro}",
            f"critic.ppo_epochs={algo.ppo_epochs}",
            f"critic.grad_clip={grad_clip!r}",
            f"critic.cliprange_value={algo.value_clip if algo.value_clip is not None else NO_CLIP!r}",
            f"critic.loss_agg_mode={LOSS_AGG[algo.loss_agg]}",
        ]
    for key, value in sorted(params.items()):
        out.append(f"+algorithm.vista_params.{key}={_q(value)}")
    out += local_section.overrides(local_section.raw_section(run), critic)
    return out + list(cfg.overrides)


def algo_lr(value: float) -> str:
    return f"{value:g}"


def compose_verl_config(overrides: list[str]) -> Any:
    """Compose verl's ``ppo_trainer`` config with ``overrides`` and validate it with verl's loader."""
    try:
        import verl.trainer.config as verl_config
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
    except ImportError as exc:
        raise ConfigError(f"the verl engine needs verl installed (pip install 'vista-plugin-verl[verl]'): {exc}") from None
    config_dir = str(Path(verl_config.__file__).parent)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            config = compose(config_name="ppo_trainer", overrides=overrides)
    except Exception as exc:  # noqa: BLE001 - Hydra's errors name the bad override
        raise ConfigError(f"verl rejected the composed overrides: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    try:
        validate_config(config=config, use_reference_policy=need_reference_policy(config),
                        use_critic=need_critic(config))
    except (AssertionError, ValueError) as exc:
        raise ConfigError(f"verl's validate_config rejected the config: {exc}") from None
    return config

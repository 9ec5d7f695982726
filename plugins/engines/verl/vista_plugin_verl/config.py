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

from vista_plugin_verl import attention, local_section, loggers, sft
from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_plugin_verl.coverage import NOT_TRAINED
from vista_plugin_verl.hydra_values import hydra_value as _q
from vista_plugin_verl.loggers import VERL_METRICS_FILE
from vista_rl import ConfigError, check_estimator_config
from vista_rl.config import RunConfig, engine_section

__all__ = ["ENGINE_ID", "EPISODES_FILE", "VERL_METRICS_FILE", "VerlEngineConfig", "check_neutral",
           "compose_overrides", "compose_verl_config", "engine_config"]

#: The agent loop's record of every episode, in the run directory.
EPISODES_FILE = "episodes.jsonl"


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
    sft_overrides: list[str] = Field(default_factory=list, description="raw Hydra overrides of verl's SFT trainer "
                                     "(sft_trainer_engine) for the SFT stage, applied last")
    python: str | None = Field(None, description="interpreter that runs verl (default: this one)")


ENGINE_ID = "verl"
#: Our loss aggregations in verl's names (``seq-mean``: the mean over sequences of each one's token mean).
LOSS_AGG = {"token-mean": "token-mean", "seq-mean": "seq-mean-token-mean"}
#: verl's learning-rate schedules (``actor.optim.lr_scheduler_type``).
SCHEDULERS = {"constant": "constant", "cosine": "cosine"}
#: verl's marker of the last checkpoint in ``trainer.default_local_dir`` (``RUN_DIR/checkpoints``).
LATEST_CHECKPOINT = "latest_checkpointed_iteration.txt"
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




#: Where verl 0.9.1's legacy trainer takes one output per sample (``trainer.use_v1=false``), so it
#: cannot hold per-turn rows; its v1 trainer takes a list (``verl/trainer/ppo/v1/agent_loop_tq.py:150``).
LEGACY_SINGLE_OUTPUT = "verl/experimental/agent_loop/agent_loop.py:_run_agent_loop (AgentLoopWorker)"


def trains_differently(run: RunConfig, cfg: VerlEngineConfig) -> list[str]:
    """Settings the verl engine would train differently from the local engine, one message each: the
    key, what verl would do instead, and what to change.  Per-turn sequences are per-turn rows on
    verl's v1 trainer (``agent_loop.turn_outputs``), the run's rollout keys (sampling included) travel
    in the dataset rows to the same episode driver the local engine runs (``dataset.env_rows``)."""
    rollout, out = run.rollout, []
    if rollout.window_size is not None and not rollout.per_turn_sequences:
        out.append(f"rollout.window_size: {rollout.window_size} with one sequence per episode concatenates turns "
                   "the model never saw together (the local engine aligns them, verl's loop does not); set "
                   "rollout.sequences: turn (one row per turn, each with the exact context it answered) or "
                   "rollout.window_size: null")
    legacy = any(item.replace(" ", "").lower() in ("trainer.use_v1=false", "+trainer.use_v1=false")
                 for item in cfg.overrides)
    if rollout.per_turn_sequences and legacy:  # (a critic on per-turn rows: estimators.advantage_over_rows)
        out.append(f"rollout.sequences: per-turn rows need verl's v1 trainer; trainer.use_v1=false (in "
                   f"engine_config.verl.overrides) keeps one output per sample ({LEGACY_SINGLE_OUTPUT})")
    out += sft.refusals(run)
    if run.model.config:
        out.append(f"model.config: the local backend's model options ({', '.join(sorted(run.model.config))}) "
                   "do not reach verl, which loads model.path with actor_rollout_ref.model.*; set model.config: {} "
                   "and put verl's own keys in engine_config.verl.overrides")
    out += local_section.refusals(local_section.raw_section(run), run.algorithm.uses_critic, run.rollout.image_size)
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
    tracking = loggers.plan(trainer.loggers, Path(run.output_dir).resolve())  # raises for an option verl lacks
    unmapped = loggers.unknown_loggers(trainer.loggers)
    if unmapped:
        out.append(f"trainer.loggers: verl has no {', '.join(unmapped)} logger; it logs to the console and "
                   f"{', '.join(sorted(tracking.backends[1:])) or 'nothing else'}")
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


def loggers_plan(run: RunConfig, run_dir: Path) -> loggers.LoggerPlan:
    """verl's tracking settings for the run's loggers, writing under ``run_dir``."""
    return loggers.plan(run.trainer.loggers, run_dir)


def policy_path(run: RunConfig) -> str:
    """The model RL starts from: the SFT stage's Hugging Face copy when there is one, else model.path."""
    if run.model.path is None:
        raise ConfigError("model.path: the verl engine needs a Hugging Face model path or id")
    if run.sft.steps:
        return str(sft.hf_model_dir(Path(run.output_dir).resolve(), run.sft.steps))
    return run.model.path


def compose_overrides(run: RunConfig, cfg: VerlEngineConfig, train_file: str | Path, val_file: str | Path,
                      resume: bool = False, flash_attn: bool = True, model_path: str | None = None) -> list[str]:
    """The run config as Hydra overrides of verl's ``ppo_trainer``: the neutral sections map onto
    verl's own keys, ``engine_config.verl`` adds the cluster, ``overrides`` come last.  ``resume``
    (``vista train --resume``) continues from the run directory's last checkpoint; otherwise verl starts
    afresh (its own default, ``auto``, would silently continue whatever checkpoint the directory holds).
    ``flash_attn``: whether the interpreter running verl has flash-attn (:mod:`.attention`; without
    it the workers get sdpa and padded batches).  ``model_path``: start from this model instead of
    :func:`policy_path` (the evaluation of the untrained model before an SFT stage)."""
    from vista_plugin_verl.estimators import verl_name

    policy = model_path or policy_path(run)
    algo, trainer, evaluation, cluster = run.algorithm, run.trainer, run.eval, cfg.cluster
    # the first validation: of the SFT model with an SFT stage (eval.after_sft), else of the untrained one
    validate_first = evaluation.after_sft if run.sft.steps and model_path is None else evaluation.at_start
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
    tracking = loggers_plan(run, run_dir)
    out = [
        f"data.train_files={_q(str(train_file))}",
        f"data.val_files={_q(str(val_file))}",
        f"data.train_batch_size={trainer.seeds_per_step}",
        f"data.max_prompt_length={cluster.max_prompt_length}",
        f"data.max_response_length={cluster.max_response_length}",
        f"data.seed={run.seed}",
        "data.shuffle=false",  # the rows are each step's seeds in step order (dataset.run_rows)
        "data.return_raw_chat=true",
        "data.return_multi_modal_inputs=false",
        "data.filter_overlong_prompts=false",
        f"actor_rollout_ref.model.path={_q(policy)}",
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
        f"trainer.val_before_train={_q(validate_first)}",
        f"trainer.n_gpus_per_node={cluster.n_gpus_per_node}",
        f"trainer.nnodes={cluster.nnodes}",
        f"trainer.default_local_dir={_q(str(run_dir / 'checkpoints'))}",
        f"trainer.resume_mode={'auto' if resume else 'disable'}",
        f"trainer.project_name={_q(tracking.project)}",
        f"trainer.experiment_name={_q(tracking.experiment)}",
        f"trainer.logger={_q(tracking.backends)}",
    ]
    # verl's trackers read the rest from the environment, and write under the working directory unless
    # told: the run directory instead, on every node (the TaskRunner that logs is a Ray actor: the
    # variables travel in its runtime env)
    out += [f"+ray_kwargs.ray_init.runtime_env.env_vars.{name}={_q(value)}" for name, value in sorted(tracking.env.items())]
    # one line per episode, as the local engine's metrics count them (agent_loop.record_episode)
    out.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VISTA_VERL_EPISODES={_q(str(run_dir / EPISODES_FILE))}")
    if critic:
        out += [
            f"critic.model.path={_q(policy)}",  # as the local value head, it starts from the SFT body
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
    if run.rollout.per_turn_sequences:  # the bridge's credit over per-turn rows (estimators.advantage_over_rows)
        out.append(f"+algorithm.vista_turn_credit={algo.turn_credit}")
    out += local_section.overrides(local_section.raw_section(run), critic)
    if not flash_attn:
        out += attention.sdpa_overrides(critic, cfg.overrides)
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

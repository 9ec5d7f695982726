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

from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_rl import ConfigError
from vista_rl.config import RunConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seeds(_Section):
    start: int = Field(0, ge=0)
    count: int = Field(64, ge=1)

    def values(self) -> list[int]:
        return list(range(self.start, self.start + self.count))


class VerlAlgorithm(_Section):
    estimator: str = Field("bilevel_gae", description="a vista estimator id (bridged as vista_<id>)")
    gamma: float = Field(1.0, ge=0.0, le=1.0)
    lam: float = Field(1.0, ge=0.0, le=1.0)
    estimator_params: dict[str, Any] = Field(default_factory=dict, description="e.g. turn_gamma: 0.95")
    kl_coef: float = Field(0.0, ge=0.0, description="KL loss to the reference policy (0: none)")


class VerlTrainer(_Section):
    steps: int = Field(300, ge=1)
    seeds_per_step: int = Field(128, ge=1, description="data.train_batch_size")
    mini_batch_size: int = Field(32, ge=1, description="actor/critic ppo_mini_batch_size")
    micro_batch_size_per_gpu: int = Field(1, ge=1)
    actor_lr: float = Field(1e-6, gt=0.0)
    critic_lr: float = Field(1e-5, gt=0.0)
    train_seeds: Seeds = Field(default_factory=lambda: Seeds(start=0, count=10_000))
    val_seeds: Seeds = Field(default_factory=lambda: Seeds(start=1_000_000, count=128))
    test_freq: int = Field(20, ge=-1)
    save_freq: int = Field(50, ge=-1)


class VerlCluster(_Section):
    n_gpus_per_node: int = Field(8, ge=1)
    nnodes: int = Field(1, ge=1)
    rollout_backend: str = Field("vllm", description="vllm | sglang")
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.5, gt=0.0, le=1.0)
    max_prompt_length: int = Field(2048, ge=16)
    max_response_length: int = Field(2400, ge=16, description="all turns of an episode, observations included")


class VerlEngineConfig(_Section):
    algorithm: VerlAlgorithm = Field(default_factory=VerlAlgorithm)
    trainer: VerlTrainer = Field(default_factory=VerlTrainer)
    cluster: VerlCluster = Field(default_factory=VerlCluster)
    overrides: list[str] = Field(default_factory=list, description="raw Hydra overrides, applied last")
    dry_run: bool = False
    python: str | None = Field(None, description="interpreter that runs verl (default: this one)")


CRITIC_ESTIMATORS = {"gae", "masked_gae", "bilevel_gae", "turnwise_gae"}


def engine_config(run: RunConfig) -> VerlEngineConfig:
    from vista_rl.config import validate_config

    return validate_config(VerlEngineConfig, run.engine_config, "engine_config")


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


def compose_overrides(run: RunConfig, cfg: VerlEngineConfig, train_file: str | Path, val_file: str | Path) -> list[str]:
    from vista_plugin_verl.estimators import verl_name

    if run.model.path is None:
        raise ConfigError("model.path: the verl engine needs a Hugging Face model path or id")
    algo, trainer, cluster = cfg.algorithm, cfg.trainer, cfg.cluster
    estimator = verl_name(algo.estimator)
    critic = algo.estimator in CRITIC_ESTIMATORS
    sampling = run.rollout.sampling
    run_dir = Path(run.output_dir).resolve()
    out = [
        f"data.train_files={_q(str(train_file))}",
        f"data.val_files={_q(str(val_file))}",
        f"data.train_batch_size={trainer.seeds_per_step}",
        f"data.max_prompt_length={cluster.max_prompt_length}",
        f"data.max_response_length={cluster.max_response_length}",
        "data.return_raw_chat=true",
        "data.return_multi_modal_inputs=false",
        "data.filter_overlong_prompts=false",
        f"actor_rollout_ref.model.path={_q(run.model.path)}",
        f"actor_rollout_ref.actor.optim.lr={algo_lr(trainer.actor_lr)}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={trainer.mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={trainer.micro_batch_size_per_gpu}",
        f"actor_rollout_ref.actor.use_kl_loss={_q(algo.kl_coef > 0)}",
        f"actor_rollout_ref.actor.kl_loss_coef={algo.kl_coef!r}",
        f"actor_rollout_ref.rollout.name={cluster.rollout_backend}",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={run.rollout.group_size}",
        f"actor_rollout_ref.rollout.temperature={sampling.temperature!r}",
        f"actor_rollout_ref.rollout.top_p={sampling.top_p!r}",
        f"actor_rollout_ref.rollout.prompt_length={cluster.max_prompt_length}",
        f"actor_rollout_ref.rollout.response_length={cluster.max_response_length}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={cluster.tensor_parallel_size}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={cluster.gpu_memory_utilization!r}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={trainer.micro_batch_size_per_gpu}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={trainer.micro_batch_size_per_gpu}",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={run.rollout.max_turns}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
        f"algorithm.adv_estimator={estimator}",
        f"algorithm.gamma={algo.gamma!r}",
        f"algorithm.lam={algo.lam!r}",
        f"critic.enable={_q(critic)}",
        f"trainer.total_training_steps={trainer.steps}",
        f"trainer.n_gpus_per_node={cluster.n_gpus_per_node}",
        f"trainer.nnodes={cluster.nnodes}",
        f"trainer.test_freq={trainer.test_freq}",
        f"trainer.save_freq={trainer.save_freq}",
        f"trainer.default_local_dir={_q(str(run_dir / 'checkpoints'))}",
        "trainer.project_name=vista",
        f"trainer.experiment_name={_q(run_dir.name)}",
        "trainer.logger=[console]",
    ]
    if critic:
        out += [
            f"critic.model.path={_q(run.model.path)}",
            f"critic.optim.lr={algo_lr(trainer.critic_lr)}",
            f"critic.ppo_mini_batch_size={trainer.mini_batch_size}",
            f"critic.ppo_micro_batch_size_per_gpu={trainer.micro_batch_size_per_gpu}",
        ]
    for key, value in sorted(algo.estimator_params.items()):
        out.append(f"+algorithm.vista_params.{key}={_q(value)}")
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

"""Run configuration: pydantic models, loaded from YAML, with ``--set key=value`` overrides.

Every error names the offending key (``rollout.max_turns: Input should be greater than 0``), because a
config mistake found after a GPU job starts is the most expensive kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar
from warnings import warn

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vista_rl.errors import ConfigError
from vista_rl.model import Sampling

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class Section(BaseModel):
    """Base of config sections: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class EnvSection(Section):
    """The environment every episode runs in."""

    id: str = Field(description="registered env id (`vista envs` lists them), e.g. sokoban/sokoban-v0")
    config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the env "
                                   "(its README's Config section)")


class ModelSection(Section):
    """The policy: which backend serves it and from where."""

    backend: str = Field("transformers", description="registered model backend id (`vista models` lists them)")
    path: str | None = Field(None, description="model directory or hub id the backend loads (the engine "
                             "trains the same weights)")
    config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the backend "
                                   "(device, dtype, url, ...)")


class SamplingSection(Sampling):
    max_tokens: int = Field(128, ge=1, description="most new tokens per model turn")


class ToolOverride(Section):
    """How to make one tool an env offers: ``use`` another registered id (default: the same id)
    with ``config``.  This is how a run configures a tool (a detector checkpoint) or moves it to a
    service (``use: ray/detection/grounding-dino``) without touching the env."""

    use: str | None = Field(None, description="registered tool id to make instead (default: the same id), "
                            "e.g. ray/detection/grounding-dino")
    config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of that tool")


class RolloutSection(Section):
    """How episodes are played: turns, context, timeouts, sampling, tools; the same in eval and training."""

    max_turns: int = Field(5, ge=1, description="model turns per episode (per attempt with reflection) before "
                           "it stops with stop_reason max_turns")
    group_size: int = Field(1, ge=1, description="samples per seed (G)")
    window_size: int | None = Field(None, ge=0, description="keep only the last k turns in context (0: the "
                                    "current observation alone, a Markov policy)")
    sequences: Literal["auto", "episode", "turn"] = Field(
        "auto", description="training sequences: one per episode (the turns concatenated) or one per turn "
        "(each the exact context that turn answered, as a context window needs); auto: turn when "
        "window_size is 0, else episode")
    max_context_tokens: int | None = Field(None, ge=1, description="stop an episode (stop_reason token_budget) "
                                           "once its context holds this many tokens (null: no limit)")
    image_size: int | None = Field(None, ge=28, description="show the model every observation image resized to "
                                   "this square size (null: as the env renders it); the episode driver applies "
                                   "it, so every engine and `vista eval` show the same pixels (was "
                                   "engine_config.local.image_size)")
    reflection: bool = Field(False, description="engine-side reflection: after a wrong final answer, reset the "
                             "env to the same seed and let the model try again with feedback (docs/reflection.md)")
    reflection_attempts: int = Field(1, ge=1, description="tries per episode with reflection, the first included "
                                     "(was max_attempts)")
    env_timeout_s: float = Field(60.0, gt=0, description="seconds one env reset or step may take; past it the "
                                 "episode fails with the error recorded and the batch goes on")
    tool_timeout_s: float = Field(30.0, gt=0, description="seconds one tool call may take; past it the episode "
                                  "fails (stop_reason tool_timeout) and the batch goes on")
    sampling: SamplingSection = Field(default_factory=SamplingSection, description="sampling of every model turn")
    episodes: int = Field(20, ge=1, description="seeds per eval run (B); each runs group_size samples")
    batch_size: int = Field(64, ge=1, description="most episodes alive at once (one model call per turn)")
    max_workers: int | None = Field(None, ge=1, description="env/tool threads (default: batch_size)")
    model_workers: int = Field(1, ge=1, description="eval: model workers, each with its own backend "
                               "(vista_rl.rollout.model_workers)")
    model_worker_mode: Literal["process", "ray"] = Field("process", description="model workers as processes or "
                                                         "Ray actors (vista-plugin-ray)")
    model_worker_options: dict[str, Any] = Field(default_factory=dict, description="pool options, e.g. "
                                                 "start_timeout_s; Ray: actor_options={num_gpus: 1}")
    tool_response_role: Literal["user", "tool"] = Field(
        "user", description="role of the message carrying tool results back to the model")
    describe_tools: bool = Field(True, description="append the env's tool schemas to its system prompt")
    tools: dict[str, ToolOverride] = Field(
        default_factory=dict, description="tool id an env offers -> {use: other id, config: {...}} to make instead")

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, {"max_attempts": "reflection_attempts"}, "rollout.")

    @property
    def max_attempts(self) -> int:
        """Old name of :attr:`reflection_attempts`, readable until 0.2 (code written before the rename)."""
        return self.reflection_attempts

    @property
    def per_turn_sequences(self) -> bool:
        """Whether trainers get one sequence per turn (``Trajectory.turn_views``)."""
        if self.sequences == "auto":
            return self.window_size == 0
        return self.sequences == "turn"


#: Estimators that learn a value function (a critic): choosing one turns the critic on by default.
VALUE_ESTIMATORS = frozenset({"gae", "masked_gae", "bilevel_gae", "turnwise_gae"})


class SeedRange(Section):
    """``count`` consecutive env seeds from ``start``: train and held-out ranges must not overlap."""

    start: int = Field(0, ge=0, description="first seed of the range")
    count: int = Field(64, ge=1, description="number of consecutive seeds")

    def seeds(self) -> list[int]:
        return list(range(self.start, self.start + self.count))

    def overlaps(self, other: SeedRange) -> bool:
        return self.start < other.start + other.count and other.start < self.start + self.count


class AlgorithmSection(Section):
    """The RL objective, the same for every engine.  ``estimator`` is any registered advantage-estimator
    id; ``estimator_params`` are its keyword arguments (``gamma``, ``lam``, ``turn_gamma``, ...)."""

    estimator: str = Field("grpo", description="registered advantage-estimator id (`vista estimators` lists them)")
    estimator_params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the "
                                             "estimator (gamma, lam, turn_gamma, ...)")
    clip_ratio_low: float = Field(0.2, ge=0.0, description="PPO clip below: the ratio is kept >= 1 - this")
    clip_ratio_high: float = Field(0.2, ge=0.0, description="PPO clip above: the ratio is kept <= 1 + this "
                                   "(larger than clip_ratio_low: DAPO's clip-higher)")
    kl_coef: float = Field(0.0, ge=0.0, description="k3 KL to the frozen reference model (0: no reference)")
    entropy_coef: float = Field(0.0, description="weight of the entropy bonus subtracted from the loss (0: none)")
    loss_agg: Literal["token-mean", "seq-mean"] = Field(
        "token-mean", description="token-mean: over all tokens of a mini-batch; seq-mean: mean of per-sequence means")
    turn_credit: Literal["episode", "turn", "state"] = Field(
        "episode", description="how an episode's outcome reaches its turns with per-turn sequences "
        "(rollout.sequences: turn; the local engine): episode: each turn carries the episode's advantage over "
        "its number of turns; turn: the same, undivided; state: the estimator over each turn's return-to-go "
        "within the batch's turns with the same context, averaged over the turns with the same context and "
        "reply (a reply the whole group gave alike gets 0; docs/main-job.md, the tool job)")
    ppo_epochs: int = Field(1, ge=1, description="passes of updates over one rollout batch")
    mini_batches: int = Field(1, ge=1, description="optimizer steps per epoch over one rollout batch")
    critic: bool | None = Field(None, description="learn a value function; default: on for the GAE family")
    value_clip: float | None = Field(0.2, gt=0.0, description="clip of the value loss (null: none)")

    @property
    def uses_critic(self) -> bool:
        return self.critic if self.critic is not None else self.estimator in VALUE_ESTIMATORS


class TrainerSection(Section):
    """The RL stage: how long, on which seeds, with what optimizer."""

    steps: int = Field(20, ge=0, description="RL steps (0: no RL stage)")
    seeds_per_step: int = Field(8, ge=1, description="envs per step (B); each is sampled rollout.group_size times")
    train_seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=0, count=1000),
                                   description="env seeds RL steps draw from (disjoint from eval.seeds)")
    lr: float = Field(1e-4, gt=0.0, description="peak learning rate of the RL optimizer (AdamW)")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay of the SFT and RL optimizers")
    betas: tuple[float, float] = Field(
        (0.9, 0.999), description="AdamW betas of the SFT and RL optimizers; a smaller second beta (0.95, "
        "as many LLM recipes use) forgets the large early gradients of the format tokens sooner, which "
        "otherwise keep the step size of everything learned later small")
    warmup_steps: int = Field(0, ge=0, description="RL steps of linear learning-rate warm-up from 0")
    scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="learning rate after warm-up: constant, or decaying to 0 at the last RL step")
    micro_batch_size: int = Field(16, ge=1, description="sequences per forward (per device); gradients accumulate")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="clip of the gradient norm per optimizer "
                                        "step (null: no clipping)")
    checkpoint_every: int = Field(0, ge=0, description="steps between checkpoints (0: only at the end)")
    keep_checkpoints: int = Field(2, ge=1, description="newest checkpoints kept on disk; older ones are deleted")
    eval_every: int = Field(0, ge=0, description="RL steps between held-out evals (0: only at the end)")
    loggers: list[str | dict[str, Any]] = Field(
        default_factory=lambda: list[str | dict[str, Any]](["tensorboard", "jsonl"]),
        description="experiment trackers fed every step's metrics and the run config (`vista loggers` lists "
        "them): a registered id, or {id: ID, **options} (e.g. {id: wandb, project: my-project})")

    @model_validator(mode="after")
    def _logger_entries(self) -> TrainerSection:
        for index, entry in enumerate(self.loggers):
            if isinstance(entry, dict) and not isinstance(entry.get("id"), str):
                raise ValueError(f"trainer.loggers[{index}]: a mapping entry needs an 'id' naming the logger")
        return self


class SftSection(Section):
    """Supervised warm start on oracle rollouts (``source: oracle``) or a trajectory JSONL."""

    steps: int = Field(0, ge=0, description="optimizer steps (0: no SFT stage)")
    source: Literal["oracle", "jsonl"] = Field("oracle", description="oracle: the env's own solutions on "
                                               "sft.seeds; jsonl: recorded trajectories at sft.path")
    path: str | None = Field(None, description="trajectory JSONL to learn from (source: jsonl)")
    seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=50_000, count=64),
                             description="env seeds the oracle plays (source: oracle; disjoint from eval.seeds)")
    batch_size: int = Field(8, ge=1, description="training sequences per SFT optimizer step")
    lr: float = Field(1e-3, gt=0.0, description="peak learning rate of the SFT optimizer (AdamW)")
    warmup_steps: int = Field(0, ge=0, description="SFT steps of linear learning-rate warm-up from 0")
    scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="SFT learning rate after warm-up: constant, or decaying to 0 at the last SFT "
        "step (a decay lets the last steps settle instead of hopping around the minimum at the peak rate)")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="clip of the SFT gradient norm (null: none)")
    keep_failed: bool = Field(False, description="source: oracle: also learn from the episodes the env's teacher "
                              "failed (plain behaviour cloning of a flawed teacher, its mistakes included); default: "
                              "only its successful episodes")

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> SftSection:
        if self.source == "jsonl" and not self.path:
            raise ValueError("sft.source is 'jsonl' but sft.path is not set")
        return self


class EvalSection(Section):
    """Held-out evaluation: seeds disjoint from every training seed."""

    seeds: SeedRange = Field(default_factory=lambda: SeedRange(start=100_000, count=100),
                             description="held-out env seeds (never trained on)")
    temperature: float = Field(0.0, ge=0.0, description="0: greedy")
    at_start: bool = Field(True, description="evaluate the untrained model first")
    after_sft: bool = Field(True, description="evaluate after the SFT stage")


class RunConfig(Section):
    """The run config every engine receives.

    Everything but ``engine_config`` is engine-neutral: the same YAML trains with ``local`` on a laptop
    and with ``verl`` on a cluster.  ``engine_config`` holds one section per engine id
    (``engine_config.local``, ``engine_config.verl``), each with only what that engine alone has;
    an engine reads its own section (:func:`engine_section`) and ignores the others.
    """

    engine: str = Field("local", description="registered training engine id (`vista engines` lists them)")
    seed: int = Field(0, description="seed of the run's own randomness (initialisation, sampling, data order)")
    output_dir: str = Field("runs/run", description="run directory: config, metrics, trajectories, checkpoints")
    env: EnvSection
    model: ModelSection = Field(default_factory=ModelSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    trainer: TrainerSection = Field(default_factory=TrainerSection)
    sft: SftSection = Field(default_factory=SftSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    engine_config: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="engine id -> that engine's own settings")

    @model_validator(mode="before")
    @classmethod
    def _image_size_moved(cls, data: Any) -> Any:
        """``engine_config.local.image_size`` became ``rollout.image_size`` (the episode driver applies it
        for every engine, and the local engine's encoder resizes recorded trajectories to the same size): the
        old key still sets it, with a ``FutureWarning``, so old configs keep their meaning."""
        if not isinstance(data, dict):
            return data
        local = (data.get("engine_config") or {}).get("local")
        old = local.get("image_size") if isinstance(local, dict) else None
        if old is None:
            return data
        rollout = data.get("rollout") or {}
        if not isinstance(rollout, dict):
            return data
        new = rollout.get("image_size")
        if new is not None and new != old:
            raise ValueError(f"engine_config.local.image_size ({old}) is the old name of rollout.image_size ({new}); "
                             "give only rollout.image_size")
        warn("config key engine_config.local.image_size is deprecated and goes away in vista-rl 0.2; use "
             "rollout.image_size (the episode driver resizes observations for every engine)", FutureWarning,
             stacklevel=2)
        return {**data, "rollout": {**rollout, "image_size": old}}

    @model_validator(mode="after")
    def _disjoint_seeds(self) -> RunConfig:
        if self.trainer.steps and self.trainer.train_seeds.overlaps(self.eval.seeds):
            raise ValueError("trainer.train_seeds overlaps eval.seeds: held-out seeds must not be trained on")
        if self.sft.steps and self.sft.source == "oracle" and self.sft.seeds.overlaps(self.eval.seeds):
            raise ValueError("sft.seeds overlaps eval.seeds: held-out seeds must not be trained on")
        if self.algorithm.turn_credit != "episode" and not self.rollout.per_turn_sequences:
            raise ValueError(f"algorithm.turn_credit: {self.algorithm.turn_credit} needs per-turn sequences "
                             "(rollout.sequences: turn, or window_size: 0); one sequence per episode keeps "
                             "the estimator's own per-token credit")
        self._check_turn_critic()
        return self

    def _check_turn_critic(self) -> None:
        """Per-turn sequences: an estimator with a critic gives each token its own credit over the
        episode's replies (``vista_rl.algorithms.turn_credit.turn_token_advantages``), so nothing is left
        for ``turn_credit`` to share out; one without a critic has no use for a value head."""
        algorithm = self.algorithm
        if not self.rollout.per_turn_sequences:
            return
        needs_values = algorithm.estimator in VALUE_ESTIMATORS
        if needs_values and algorithm.turn_credit != "episode":
            raise ValueError(f"algorithm.turn_credit: {algorithm.turn_credit} shares out an episode's advantage, "
                             f"but {algorithm.estimator} gives each token its own credit from the critic's values; "
                             "leave turn_credit at episode or use an estimator without a critic (grpo, rloo, ...)")
        if algorithm.uses_critic and not needs_values:
            raise ValueError(f"algorithm.critic: {algorithm.estimator} on per-turn sequences shares out each "
                             "episode's advantage and uses no values; set algorithm.critic: false or use an "
                             "estimator of the GAE family")


def engine_section(run: RunConfig, engine_id: str, model: type[ConfigT]) -> ConfigT:
    """Validate ``run.engine_config[engine_id]`` (empty when absent) into ``model``; errors name the
    full key (``engine_config.local.device: ...``)."""
    try:
        return model.model_validate(run.engine_config.get(engine_id) or {})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "run config", prefix=f"engine_config.{engine_id}")) from None


#: A section's key tree: each key -> ``None``, or the key tree of its subsection.
KeyTree: TypeAlias = "dict[str, KeyTree | None]"


def section_keys(model: type[BaseModel]) -> KeyTree:
    """The key tree of a section model (subsections nested): what an engine that is not installed
    leaves for another engine to check its section against (see :func:`check_section_keys`)."""
    tree: KeyTree = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        nested = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        tree[name] = section_keys(annotation) if nested else None  # type: ignore[arg-type]
    return tree


def check_section_keys(data: Any, known: KeyTree, prefix: str, owner: str) -> None:
    """Raise :class:`ConfigError` naming the full key (``engine_config.verl.cluster.nodes``) of the first
    key of ``data`` that ``known`` lacks.  How each engine checks the other engine's section where that
    engine's schema is not installed: one run config serves every engine, so a misspelt key in any
    section is an error on every engine, not a setting dropped without a word."""
    if not isinstance(data, dict):
        raise ConfigError(f"invalid run config:\n  {prefix}: a section (mapping) is expected")
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"invalid run config:\n  {prefix}.{key}: unknown key (check the spelling; {owner} "
                              f"has {', '.join(known)})")
        subsection = known[key]
        if subsection is not None:
            check_section_keys(value, subsection, f"{prefix}.{key}", owner)


def renamed_keys(data: Any, renames: dict[str, str], prefix: str = "") -> Any:
    """Accept the old name of each renamed config key for one release (``renames``: old -> new).

    For a ``model_validator(mode="before")``: the old key is moved to the new one with a
    ``FutureWarning`` (shown to users by default, unlike ``DeprecationWarning``) that names both;
    giving both is an error.  ``prefix`` is the section's dotted path, for the messages.
    """
    if not isinstance(data, dict) or not renames.keys() & data.keys():
        return data
    data = dict(data)
    for old, new in renames.items():
        if old not in data:
            continue
        if new in data:
            raise ValueError(f"{prefix}{old} is the old name of {prefix}{new}; give only {prefix}{new}")
        warn(f"config key {prefix}{old} is deprecated and goes away in vista-rl 0.2; use {prefix}{new}",
             FutureWarning, stacklevel=2)
        data[new] = data.pop(old)
    return data


def parse_override(override: str) -> tuple[list[str], Any]:
    """``"a.b=3"`` -> (["a", "b"], 3); values are parsed as YAML scalars/lists."""
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {override!r} must look like key=value (for example rollout.max_turns=3)")
    path = key.split(".")
    if any(not part for part in path):
        raise ConfigError(f"override key {key!r} has an empty part")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return path, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with dotted-key overrides applied (intermediate dicts created)."""
    result: dict[str, Any] = _deep_copy(data)
    for override in overrides:
        path, value = parse_override(override)
        node = result
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ConfigError(f"cannot set {'.'.join(path)}: {where} is a {type(child).__name__}, not a section")
            node = child
        node[path[-1]] = value
    return result


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


def format_validation_error(error: ValidationError, source: str = "config", prefix: str = "") -> str:
    """One line per error, each naming its full dotted key (under ``prefix`` when given)."""
    lines = [f"invalid {source}:"]
    for item in error.errors():
        parts = [prefix] if prefix else []
        key = ".".join(parts + [str(part) for part in item["loc"]]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check the spelling; see the documented keys of this section)"
        lines.append(f"  {key}: {message}")
    return "\n".join(lines)


def validate_config(model: type[ConfigT], data: dict[str, Any], source: str = "config") -> ConfigT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_config(
    model: type[ConfigT], path: str | Path | None = None, overrides: Iterable[str] = (),
    base: dict[str, Any] | None = None,
) -> ConfigT:
    """Load YAML (if given), apply overrides and validate into ``model``."""
    data: dict[str, Any] = dict(base or {})
    source = "config"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must contain a mapping at the top level")
        data.update(loaded)
    data = apply_overrides(data, overrides)
    return validate_config(model, data, source)

"""The SFT stage on verl: the local engine's oracle data through verl's own SFT trainer, then RL from it.

The local engine warms up with ``sft.steps`` of supervised training on the env oracle's successful
episodes (``sft.seeds``), one example per episode or, with per-turn sequences, one per turn holding
the context that turn showed.  Here the same episodes are played the same way (the scripted oracle
through :class:`~vista_rl.rollout.RolloutEngine`, the one episode driver), written as verl's
multi-turn SFT rows (``messages`` with ``<image>`` placeholders, ``images``; the loss on assistant
messages, ``verl/utils/dataset/multiturn_sft_dataset.py:234-239``) and trained by
``verl.trainer.sft_trainer`` under ``torchrun``; it saves a Hugging Face copy of the last step
(``checkpoint.save_contents`` with ``hf_model``), which RL then starts from, in the same run directory.

What verl's SFT trainer cannot do as the local engine does is refused by name (:func:`refusals`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from vista_plugin_verl import local_section, loggers
from vista_plugin_verl.hydra_values import hydra_value
from vista_rl import ConfigError, Message, Trajectory, escape_placeholders
from vista_rl.config import RunConfig

#: The SFT stage's folder in the run directory.
SFT_DIR = "sft"
#: verl's SFT learning-rate schedules (``optim.lr_scheduler_type``).
SCHEDULERS = {"constant": "constant", "cosine": "cosine"}
#: Where verl's SFT dataset puts the loss: every assistant message of a row.
LOSS_ON_EVERY_ASSISTANT = "verl/utils/dataset/multiturn_sft_dataset.py:234-239"
NO_CLIP = 1.0e9


def sft_dir(run_dir: Path) -> Path:
    return run_dir / SFT_DIR


def hf_model_dir(run_dir: Path, steps: int) -> Path:
    """The Hugging Face copy of the SFT model RL starts from (verl's checkpoint handler:
    ``default_local_dir/global_step_N``, ``huggingface/`` inside it)."""
    return sft_dir(run_dir) / "checkpoints" / f"global_step_{steps}" / "huggingface"


def refusals(run: RunConfig) -> list[str]:
    """What verl's SFT trainer would train differently from the local engine's SFT stage."""
    sft, out = run.sft, list[str]()
    if not sft.steps:
        return out
    if sft.source != "oracle":
        out.append("sft.source: jsonl: the verl engine builds its SFT rows from the env's oracle (sft.seeds) only; "
                   "use sft.source: oracle, or run the SFT stage with --engine local and set model.path to "
                   "RUN_DIR/models/sft and sft.steps: 0")
    if sft.scheduler not in SCHEDULERS:
        out.append(f"sft.scheduler: verl's SFT trainer schedules {' or '.join(SCHEDULERS)}, not {sft.scheduler!r}")
    rollout = run.rollout
    if rollout.per_turn_sequences and rollout.window_size:
        out.append(f"rollout.window_size: {rollout.window_size} with per-turn SFT examples: the local engine trains "
                   "only each example's last reply (the earlier turns are context), verl's SFT dataset every "
                   f"assistant message ({LOSS_ON_EVERY_ASSISTANT}); use window_size 0 or null, or sft.steps: 0")
    return out


# ------------------------------------------------------------------------------- the data
def _png(image: Any) -> dict[str, Any]:
    """An image of a row: PNG bytes, decoded unchanged by :class:`.sft_dataset.VistaSFTDataset`."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return {"bytes": buffer.getvalue()}


def dataset_class_file() -> str:
    """The file of our SFT dataset class, for verl's ``data.custom_cls.path`` (found without importing
    it: it imports verl, which the driver may not have)."""
    import importlib.util

    spec = importlib.util.find_spec("vista_plugin_verl.sft_dataset")
    if spec is None or spec.origin is None:  # pragma: no cover - the plugin ships it
        raise ConfigError("vista_plugin_verl.sft_dataset is missing from this install")
    return spec.origin


def episode_rows(trajectory: Trajectory, per_turn: bool, window_size: int | None,
                 image_size: int | None) -> list[dict[str, Any]]:
    """verl SFT rows of one episode, as the local engine's SFT examples are cut
    (``vista_plugin_local.sft_data.examples_from_turns``): the whole episode, or one row per turn with
    the last ``window_size`` exchanges before it; images as the model saw them (``rollout.image_size``)."""
    from vista_rl.rollout import shown, window_start

    pieces = []
    for index, turn in enumerate(trajectory.turns):
        seen = list(turn.images) if turn.images or index else list(trajectory.initial_images)
        message = shown(Message(turn.observation_role, turn.observation, seen), image_size)  # type: ignore[arg-type]
        pieces.append((message, escape_placeholders(turn.response)))
    spans = ([(window_start(index, window_size), index) for index in range(len(pieces))]
             if per_turn else [(0, len(pieces) - 1)])
    system = escape_placeholders(trajectory.system_prompt or "")
    rows = []
    for start, end in spans:
        messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
        images: list[dict[str, Any]] = []
        for message, response in pieces[start:end + 1]:
            messages.append({"role": message.role, "content": message.content})
            messages.append({"role": "assistant", "content": response})
            images.extend(_png(image) for image in message.images)
        rows.append({"messages": messages, "images": images})
    return rows


def oracle_rows(run: RunConfig) -> tuple[list[dict[str, Any]], str]:
    """The SFT rows of the env oracle's episodes on ``sft.seeds`` as the local engine keeps them
    (:func:`vista_rl.rollout.teacher_episodes`), and a one-line summary."""
    from vista_rl.rollout import teacher_episodes

    episodes = teacher_episodes(run)
    rollout = run.rollout
    rows = [row for trajectory in episodes.kept
            for row in episode_rows(trajectory, rollout.per_turn_sequences, rollout.window_size, rollout.image_size)]
    return rows, f"{episodes.summary()}, {len(rows)} rows"


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


# ----------------------------------------------------------------------------- the config
def overrides(run: RunConfig, cfg: Any, train_file: str | Path, flash_attn: bool = True) -> list[str]:
    """Hydra overrides of verl's ``sft_trainer_engine`` config for the run's SFT stage."""
    sft, trainer, cluster = run.sft, run.trainer, cfg.cluster
    run_dir = Path(run.output_dir).resolve()
    gpus = cluster.n_gpus_per_node
    tracking = loggers.plan(run.trainer.loggers, run_dir / SFT_DIR)
    out = [
        f"data.train_files={hydra_value(str(train_file))}",
        "data.val_files=null",
        "data.messages_key=messages",
        f"data.train_batch_size={sft.batch_size}",
        f"data.micro_batch_size_per_gpu={max(1, min(trainer.micro_batch_size, sft.batch_size // gpus or 1))}",
        f"data.max_length={cluster.max_prompt_length + cluster.max_response_length}",
        "data.truncation=error",
        # no_padding: verl's right-padded collation cannot batch multi_modal_inputs (default_collate makes
        # a dict, which tu.get_tensordict refuses: verl/utils/tensordict_utils.py:433); without
        # flash-attn the engine pads the nested rows itself (model.use_remove_padding=false below)
        "data.pad_mode=no_padding",
        "data.num_workers=0",
        f"data.custom_cls.path={hydra_value(dataset_class_file())}",  # our images as RL shows them (sft_dataset.py)
        "data.custom_cls.name=VistaSFTDataset",
        f"model.path={hydra_value(run.model.path)}",
        f"optim.lr={sft.lr:g}",
        f"optim.lr_warmup_steps={sft.warmup_steps if sft.warmup_steps else -1}",
        f"optim.lr_scheduler_type={SCHEDULERS.get(sft.scheduler, sft.scheduler)}",
        f"optim.clip_grad={sft.max_grad_norm if sft.max_grad_norm is not None else NO_CLIP!r}",
        f"optim.weight_decay={trainer.weight_decay!r}",
        f"optim.betas=[{trainer.betas[0]!r},{trainer.betas[1]!r}]",
        "checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"trainer.total_training_steps={sft.steps}",
        # verl stops at total_epochs (default 4) even before total_training_steps; the local engine cycles
        # its examples until sft.steps, so at least one batch an epoch: sft.steps epochs never bind
        f"trainer.total_epochs={sft.steps}",
        f"trainer.default_local_dir={hydra_value(str(sft_dir(run_dir) / 'checkpoints'))}",
        f"trainer.project_name={hydra_value(tracking.project)}",
        f"trainer.experiment_name={hydra_value(tracking.experiment + '-sft')}",
        f"trainer.logger={hydra_value(tracking.backends)}",
        f"trainer.seed={run.seed}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.n_gpus_per_node={gpus}",
        "trainer.nnodes=1",
    ]
    if not flash_attn:
        out += ["model.use_remove_padding=false", "+model.override_config.attn_implementation=sdpa"]
    dtypes = local_section.PRECISIONS.get(str(local_section.raw_section(run)["precision"]))
    if dtypes:  # engine_config.local.precision, as for RL's actor (local_section.overrides)
        out.append(f"+engine.mixed_precision.param_dtype={dtypes[0]}")
    return out + list(cfg.sft_overrides)


def tracking_env(run: RunConfig) -> dict[str, str]:
    """The environment verl's trackers read in the SFT trainer (``torchrun`` runs no Ray actor to carry
    it, as RL's runtime env does): without it verl's ``file`` logger writes ``PROJECT/EXPERIMENT.jsonl``
    under the working directory instead of the run directory (``verl/utils/tracking.py:534``)."""
    return loggers.plan(run.trainer.loggers, Path(run.output_dir).resolve() / SFT_DIR).env


def command(python: str, gpus: int, sft_overrides: list[str]) -> list[str]:
    """``torchrun`` on this node's GPUs, as verl's SFT examples launch it."""
    return [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc_per_node={gpus}",
            "-m", "verl.trainer.sft_trainer", *sft_overrides]


def compose(sft_overrides: list[str]) -> Any:
    """verl's ``sft_trainer_engine`` config with ``sft_overrides`` (Hydra names a bad override)."""
    try:
        import verl.trainer.config as verl_config
        from hydra import compose as hydra_compose
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
    except ImportError as exc:
        raise ConfigError(f"the verl engine needs verl installed (pip install -e 'plugins/engines/verl[verl]'): {exc}") from None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(Path(verl_config.__file__).parent), version_base=None):
            return hydra_compose(config_name="sft_trainer_engine", overrides=sft_overrides)
    except Exception as exc:  # noqa: BLE001 - Hydra's errors name the bad override
        raise ConfigError(f"verl rejected the SFT overrides: {exc}") from None
    finally:
        GlobalHydra.instance().clear()

"""The local engine's own loggers, registered as ``jsonl`` (the record) and ``tensorboard`` (the view)
through ``register_loggers`` like any tracker, and the PNG plot of reward and success.  TensorBoard and
matplotlib are optional: without them the JSONL is still complete."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vista_plugin_local.checkpoint import DiskFullError
from vista_rl import MetricsLogger, RunStatus, scalar_metrics
from vista_rl.store import json_default

STEP_METRICS_FILE = "metrics.jsonl"  # per-step log of a training run (not the eval summary metrics.json)
EVAL_FILE = "eval.jsonl"
PLOT_FILE = "reward_success.png"


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=json_default) + "\n")
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"out of disk space while appending to {path}; earlier lines are intact. "
                                f"Free some space, then continue with `vista train --resume {path.parent}`") from None
        raise


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


class JsonlLogger(MetricsLogger):
    """The run's own record (``trainer.loggers: [jsonl]``): one JSON line per training step in
    ``metrics.jsonl`` and per held-out evaluation (``stage: eval``) in ``eval.jsonl``, exactly as the
    engine made it; the plot and ``vista`` read these files."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = run_dir

    def log(self, metrics: dict[str, Any], step: int) -> None:
        assert self.run_dir is not None, "start() first"
        append_jsonl(self.run_dir / (EVAL_FILE if metrics.get("stage") == "eval" else STEP_METRICS_FILE), metrics)


class TensorBoardLogger(MetricsLogger):
    """Scalars to ``RUN_DIR/tensorboard`` (``trainer.loggers: [tensorboard]``), named as every logger
    names them (:func:`vista_rl.scalar_metrics`: ``rl/reward_mean``, ``eval/success/value``)."""

    def __init__(self, log_dir: str = "tensorboard") -> None:
        self.log_dir = log_dir
        self._writer: Any = None

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise RuntimeError("tensorboard is not installed (pip install tensorboard); "
                               "or leave tensorboard out of trainer.loggers") from exc
        self._writer = SummaryWriter(log_dir=str(run_dir / self.log_dir))
        self._writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for name, value in scalar_metrics(metrics).items():
            self._writer.add_scalar(name, value, step)
        self._writer.flush()

    def finish(self, status: RunStatus) -> None:
        if self._writer is not None:
            self._writer.close()


def plot_reward_success(run_dir: Path) -> Path | None:
    """Reward and success over RL steps, with held-out evaluations (95% CIs) on top."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steps = [row for row in read_jsonl(run_dir / STEP_METRICS_FILE) if row.get("stage") == "rl"]
    evals = read_jsonl(run_dir / EVAL_FILE)
    if not steps and not evals:
        return None
    figure, (reward_axis, success_axis) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [row["step"] for row in steps]
    reward_axis.plot(xs, [row.get("reward_mean", float("nan")) for row in steps], label="train reward")
    reward_axis.set_xlabel("RL step")
    reward_axis.set_title("reward (train rollouts)")
    success_axis.plot(xs, [row.get("success_rate", float("nan")) for row in steps], label="train success")
    _plot_evals(success_axis, evals)
    success_axis.set_xlabel("RL step")
    success_axis.set_ylim(-0.02, 1.02)
    success_axis.set_title("success")
    success_axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    path = run_dir / PLOT_FILE
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _plot_evals(axis: Any, evals: Iterable[dict[str, Any]]) -> None:
    rows = list(evals)
    if not rows:
        return
    xs = [row["rl_step"] for row in rows]
    ys = [row["success"]["value"] for row in rows]
    low = [max(0.0, row["success"]["value"] - row["success"]["ci95_low"]) for row in rows]
    high = [max(0.0, row["success"]["ci95_high"] - row["success"]["value"]) for row in rows]
    axis.errorbar(xs, ys, yerr=[low, high], fmt="o", capsize=3, label="held-out success (95% CI)")
    for x, y, row in zip(xs, ys, rows, strict=True):
        axis.annotate(row["label"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)

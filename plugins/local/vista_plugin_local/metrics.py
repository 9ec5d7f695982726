"""Per-step metrics to JSONL (the record) and TensorBoard (the view), and the PNG plot of reward and
success.  TensorBoard and matplotlib are optional: without them the JSONL is still complete."""

from __future__ import annotations

import errno
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vista_plugin_local.checkpoint import DiskFullError
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


class MetricsLogger:
    """Writes one JSON line per step and mirrors scalars to TensorBoard when it is installed."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._tb: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        except ImportError:
            print("vista: tensorboard is not installed; metrics go to metrics.jsonl only", file=sys.stderr)

    def log(self, record: dict[str, Any], file: str = STEP_METRICS_FILE) -> None:
        append_jsonl(self.run_dir / file, record)
        if self._tb is None:
            return
        step = int(record.get("global_step", record.get("step", 0)))
        prefix = str(record.get("stage", "train"))
        for key, value in record.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or key in {"step", "global_step"}:
                continue
            if math.isfinite(float(value)):
                self._tb.add_scalar(f"{prefix}/{key}", float(value), step)
        self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


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

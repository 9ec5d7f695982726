"""Experiment trackers (training loggers): the contract every tracker implements.

Why a contract in the core: users come with the tracker they already have (TensorBoard, wandb,
MLflow, ...), and every engine must feed whichever ones a run names in ``trainer.loggers`` the same
metrics and the same config.  A tracker is a plugin item (``register_loggers``); an engine only
calls :class:`vista_rl.RunLoggers`, which makes the named loggers, hands each the same records, and
keeps a tracker that fails from ever stopping training: the failure is warned about once, recorded
in the run directory (``loggers.json``) and that logger gets no more records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

#: Why a run ended, as loggers hear it in :meth:`MetricsLogger.finish`.
RunStatus = Literal["completed", "failed", "interrupted"]


class LoggerWarning(RuntimeWarning):
    """A logger failed; training goes on without it (one warning per logger and run)."""


class MetricsLogger:
    """What a tracker implements (register it with ``register_loggers``).

    The engine calls ``start`` once with the run directory and the run config as plain JSON data,
    ``log`` once per record (a training step, or a held-out evaluation) and ``finish`` once at the
    end.  A record is a flat-or-nested dict; ``record["stage"]`` says what it is (``"sft"``, ``"rl"``
    or ``"eval"``), and :func:`scalar_metrics` gives the finite numbers in it under stable names.
    Subclassing is optional: any object with these three methods is a logger.
    """

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        """Open the tracker's run (write under ``run_dir`` when the tracker writes files)."""

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Record one step's metrics at ``step`` (the run's global optimizer step)."""
        raise NotImplementedError

    def finish(self, status: RunStatus) -> None:
        """Close the tracker's run; ``status`` says how training ended."""


def scalar_metrics(record: Mapping[str, Any], *, prefix: str | None = None) -> dict[str, float]:
    """The finite numbers of a record under ``"<stage>/<key>"`` names (nested dicts joined by ``/``).

    Every logger names the same number the same way, so wandb, MLflow and TensorBoard show
    ``rl/reward_mean`` and ``eval/success/value`` alike.  Bools become 0/1; strings, ``None`` and
    non-finite values are left out; ``step``/``global_step``/``stage`` are the record's address,
    not metrics.
    """
    head = prefix if prefix is not None else str(record.get("stage", "train"))
    out: dict[str, float] = {}

    def walk(name: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{name}/{key}", inner)
        elif isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(float(value))):
            out[name] = float(value)

    for key, value in record.items():
        if key not in {"stage", "step", "global_step"}:
            walk(f"{head}/{key}", value)
    return out


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """The run config as ``{"trainer.lr": "0.0001", ...}``: what key/value trackers (MLflow params)
    store; lists and scalars become their JSON text so they read back exactly."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_config(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return out


__all__ = ["LoggerWarning", "MetricsLogger", "RunStatus", "flat_config", "scalar_metrics"]

"""What :func:`vista_rl.train` and :func:`vista_rl.evaluate` return, and the config they take.

Apart from :mod:`vista_rl.api` (which runs the rollout engine) so that ``vista_rl`` can name these
types at import time without loading the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from vista_rl.config import RunConfig

ConfigLike: TypeAlias = "RunConfig | str | Path | Mapping[str, Any]"
"""What :func:`vista_rl.train` and :func:`vista_rl.evaluate` take as a config: a RunConfig, a YAML
path or a dict of the YAML's shape."""


@dataclass(frozen=True)
class EvalResult:
    """What :func:`evaluate` measured: the summary ``metrics.json`` holds, and where the run is."""

    run_dir: Path
    summary: dict[str, Any]
    config: RunConfig

    @property
    def success_rate(self) -> float:
        return float(self.summary["success_rate"]["value"])

    @property
    def success_ci95(self) -> tuple[float, float]:
        """The Wilson 95% interval of the success rate."""
        record = self.summary["success_rate"]
        return float(record["ci95_low"]), float(record["ci95_high"])

    @property
    def mean_reward(self) -> float:
        return float(self.summary["mean_reward"]["value"])

    @property
    def episodes(self) -> int:
        return int(self.summary["episodes"])

    @property
    def cut_off_episodes(self) -> int:
        """Episodes ended by a limit the env did not choose (see :mod:`vista_rl.turn_limit`)."""
        return int(self.summary.get("cut_off_episodes", 0))


@dataclass(frozen=True)
class RunResult:
    """What :func:`train` produced.

    ``summary`` is what the engine returned (the local engine's ``results.json``: held-out ``evals``
    per stage, the plot, ...); ``metrics`` the last record of the run's per-step log
    (``metrics.jsonl``, empty when the engine keeps none); ``model_path`` the trained model
    (``RUN_DIR/models/final``, or what the engine's summary names as ``model_path``), ``None`` when
    the engine saved none here (verl writes its own checkpoints)."""

    run_dir: Path
    summary: dict[str, Any]
    metrics: dict[str, Any]
    model_path: Path | None
    config: RunConfig

    @property
    def evals(self) -> dict[str, Any]:
        """Held-out evaluations by stage (``untrained``, ``sft``, ``rl``), as the engine reports them."""
        evals = self.summary.get("evals")
        return dict(evals) if isinstance(evals, Mapping) else {}

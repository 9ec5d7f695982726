"""``trainer.loggers`` on verl: each logger and each of its options onto verl's tracking keys.

verl logs through ``verl.utils.tracking.Tracking(project_name, experiment_name, backends)``; the rest of
each tracker's settings it reads from the environment of the TaskRunner (a Ray actor, so the variables
travel in Ray's runtime env): ``WANDB_ENTITY`` (``verl/utils/tracking.py:84``), ``MLFLOW_TRACKING_URI``
(``:104``), ``TENSORBOARD_DIR`` (``:557``), ``VERL_FILE_LOGGER_PATH`` (``:534``), and wandb's own
``WANDB_MODE``, ``WANDB_DIR``, ``WANDB_RUN_GROUP``, ``WANDB_TAGS``.  The local engine's options
(``plugins/engines/trackers``, ``vista_plugin_local.metrics``) map so:

| logger | option | verl |
|---|---|---|
| wandb | project / name | ``trainer.project_name`` / ``trainer.experiment_name`` |
| wandb | entity, mode (offline by default, as locally), group, tags | ``WANDB_ENTITY``, ``WANDB_MODE``, ``WANDB_RUN_GROUP``, ``WANDB_TAGS`` |
| mlflow | experiment / run_name | ``trainer.project_name`` / ``trainer.experiment_name`` (``tracking.py:116-117``) |
| mlflow | tracking_uri (default ``RUN_DIR/mlruns``, as locally) | ``MLFLOW_TRACKING_URI`` |
| tensorboard | log_dir (under RUN_DIR) | ``TENSORBOARD_DIR`` |
| jsonl | | verl's ``file`` logger, ``VERL_FILE_LOGGER_PATH`` = ``RUN_DIR/verl_metrics.jsonl`` |

verl has one project and one run name for every tracker, so a wandb project and an mlflow experiment
that differ are refused by name, as are mlflow tags and any option verl has no key for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vista_rl import ConfigError

#: Run-config logger ids -> verl's tracking backends (``trainer.logger``).
BACKENDS = {"tensorboard": "tensorboard", "jsonl": "file", "wandb": "wandb", "mlflow": "mlflow",
            "swanlab": "swanlab", "clearml": "clearml"}
#: verl's ``file`` logger's output in the run directory (its own line format, not the local metrics.jsonl).
VERL_METRICS_FILE = "verl_metrics.jsonl"
DEFAULT_PROJECT = "vista"
#: Each logger's options: option -> ("project" | "experiment" | an environment variable).
OPTIONS: dict[str, dict[str, str]] = {
    "wandb": {"project": "project", "name": "experiment", "entity": "WANDB_ENTITY", "mode": "WANDB_MODE",
              "group": "WANDB_RUN_GROUP", "tags": "WANDB_TAGS"},
    "mlflow": {"experiment": "project", "run_name": "experiment", "tracking_uri": "MLFLOW_TRACKING_URI"},
    "tensorboard": {"log_dir": "TENSORBOARD_DIR"},
    "jsonl": {},
    "swanlab": {},
    "clearml": {},
}


@dataclass
class LoggerPlan:
    """What verl's ``Tracking`` gets: backends, project and run names, and the environment."""

    backends: list[str] = field(default_factory=lambda: ["console"])
    project: str = DEFAULT_PROJECT
    experiment: str = ""
    env: dict[str, str] = field(default_factory=dict)


def entry_id(entry: str | dict[str, Any]) -> str:
    return entry if isinstance(entry, str) else str(entry["id"])


def unknown_loggers(loggers: list[str | dict[str, Any]]) -> list[str]:
    """Logger ids verl has no backend for (a warning: verl logs to the console and the rest)."""
    return sorted({entry_id(entry) for entry in loggers} - set(BACKENDS))


def plan(loggers: list[str | dict[str, Any]], run_dir: Path) -> LoggerPlan:
    """verl's tracking settings for ``trainer.loggers``; ConfigError naming ``trainer.loggers[i].option``
    for an option verl cannot honour.  ``run_dir`` is absolute."""
    out = LoggerPlan(experiment=run_dir.name)
    named: dict[str, tuple[str, str]] = {}  # "project"/"experiment" -> (value, where it came from)
    defaults = {"WANDB_MODE": "offline", "WANDB_DIR": str(run_dir), "TENSORBOARD_DIR": str(run_dir / "tensorboard"),
                "MLFLOW_TRACKING_URI": (run_dir / "mlruns").as_uri(),
                "VERL_FILE_LOGGER_PATH": str(run_dir / VERL_METRICS_FILE)}
    for index, entry in enumerate(loggers):
        logger = entry_id(entry)
        backend = BACKENDS.get(logger)
        if backend is None:
            continue
        if backend not in out.backends:
            out.backends.append(backend)
        for variable in _variables(logger):
            out.env.setdefault(variable, defaults[variable])
        options = {k: v for k, v in entry.items() if k != "id"} if isinstance(entry, dict) else {}
        for option, value in options.items():
            where = f"trainer.loggers[{index}].{option}"
            target = OPTIONS[logger].get(option)
            if target is None:
                raise ConfigError(f"{where}: verl's {backend} logger has no setting for {option!r} (it takes "
                                  f"{', '.join(OPTIONS[logger]) or 'no options'}; verl/utils/tracking.py)")
            if target in ("project", "experiment"):
                _name(named, target, str(value), where)
            else:
                out.env[target] = _env_value(target, value, run_dir, where)
    out.project = named.get("project", (DEFAULT_PROJECT, ""))[0]
    out.experiment = named.get("experiment", (out.experiment, ""))[0]
    return out


def _variables(logger: str) -> list[str]:
    return {"wandb": ["WANDB_MODE", "WANDB_DIR"], "mlflow": ["MLFLOW_TRACKING_URI"],
            "tensorboard": ["TENSORBOARD_DIR"], "jsonl": ["VERL_FILE_LOGGER_PATH"]}.get(logger, [])


def _name(named: dict[str, tuple[str, str]], target: str, value: str, where: str) -> None:
    """verl has one project name and one run name for all its trackers: two different ones are refused."""
    if target in named and named[target][0] != value:
        raise ConfigError(f"{where}: verl gives every tracker one {'project' if target == 'project' else 'run name'} "
                          f"(trainer.{target}_name), and {named[target][1]} already set it to {named[target][0]!r}; "
                          f"use the same value for both")
    named[target] = (value, where)


def _env_value(variable: str, value: Any, run_dir: Path, where: str) -> str:
    if variable == "WANDB_TAGS":
        return ",".join(str(tag) for tag in (value if isinstance(value, list) else [value]))
    if variable == "TENSORBOARD_DIR":
        return str(run_dir / str(value))
    if variable == "WANDB_MODE" and value not in ("offline", "online"):
        raise ConfigError(f"{where}: wandb's mode is 'offline' or 'online', not {value!r}")
    return str(value)

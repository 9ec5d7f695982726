"""VISTA: plugin-based training and evaluation of VLM agents with multi-turn, tool-integrated RL.

The core needs no torch: training engines are plugins (``vista-plugin-local``, ``vista-plugin-verl``).

``import vista_rl`` runs no plugin code: plugins are discovered on the first registry query.

This module is the public API (see "Public API" in CONTRIBUTING.md): plugins import what they need
from here, plus the documented subpackages ``vista_rl.hookspecs``, ``vista_rl.config``,
``vista_rl.engine_contract``, ``vista_rl.serving``, ``vista_rl.model_paths``, ``vista_rl.rollout``,
``vista_rl.store``, ``vista_rl.baselines`` and ``vista_rl.cli``.  Every other module
is internal and may change in any release; ``tests/test_import_graph.py`` holds first-party plugins
to that line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vista_rl import config_fields  # markers and the check for client-settable env config
from vista_rl._engine_build import check_estimator_config
from vista_rl._plugins import PluginHost, PluginInfo, get_plugins, host, load_plugins
from vista_rl._registry import ItemSpec, is_import_path, resolve_import_path
from vista_rl.engine_contract import Engine, EnginePlan
from vista_rl.env import Env, EnvWrapper, StepResult, declared_actions, episode_seed
from vista_rl.errors import ConfigError, DuplicateItemError, PluginLoadError, UnknownItemError, VistaError
from vista_rl.estimator import AdvantageBatch, AdvantageEstimator, AdvantageOutput
from vista_rl.hookspecs import (
    Register,
    RegisterDataset,
    RegisterEngine,
    RegisterEnv,
    RegisterEstimator,
    RegisterJudge,
    RegisterLogger,
    RegisterModel,
    RegisterModelFamily,
    RegisterTool,
    hookimpl,
    hookspec,
)
from vista_rl.judge import Judge, JudgeResult
from vista_rl.judges import normalize_answer, strip_reasoning
from vista_rl.logger import LoggerWarning, MetricsLogger, RunStatus, flat_config, scalar_metrics
from vista_rl.loggers import RunLoggers, check_loggers
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.model_family import ModelFamily
from vista_rl.observation import (
    IMAGE_PLACEHOLDER,
    Chat,
    Message,
    Observation,
    count_placeholders,
    escape_placeholders,
    image_to_data_url,
    observation_fingerprint,
)
from vista_rl.parsing import ParsedResponse, ParsedToolCall, ResponseFormat, parse_response, split_actions
from vista_rl.run_results import ConfigLike, EvalResult, RunResult
from vista_rl.task import TaskRecord
from vista_rl.tool import Tool, ToolContext, ToolResult
from vista_rl.trajectory import TokenView, ToolCallRecord, Trajectory, Turn

__version__ = "0.1.0"

if TYPE_CHECKING:
    from rich.console import Console

    from vista_rl.config import RunConfig


def make_env(env_id: str, /, **config: Any) -> Env:
    """Create a registered environment, like ``gymnasium.make``."""
    return cast(Env, host().make("envs", env_id, **config))


def make_tool(tool_id: str, /, **config: Any) -> Tool:
    """Create a registered tool with ``config``."""
    return cast(Tool, host().make("tools", tool_id, **config))


def make_judge(judge_id: str, /, **config: Any) -> Judge:
    """Create a registered reward judge with ``config``."""
    return cast(Judge, host().make("judges", judge_id, **config))


def make_logger(logger_id: str, /, **options: Any) -> MetricsLogger:
    """Create a registered experiment tracker (what a ``trainer.loggers`` entry names) with ``options``."""
    return cast(MetricsLogger, host().make("loggers", logger_id, **options))


def make_estimator(estimator_id: str, /, **params: Any) -> AdvantageEstimator:
    """The estimator function, with ``params`` bound when given (it is not instantiated)."""
    return cast(AdvantageEstimator, host().make("estimators", estimator_id, **params))


def make_model(model_id: str, /, **config: Any) -> ModelBackend:
    """Create a registered model backend (policy) with ``config``."""
    return cast(ModelBackend, host().make("models", model_id, **config))


def make_dataset(dataset_id: str, /, **config: Any) -> Sequence[TaskRecord]:
    """Load a registered dataset: a sequence of :class:`TaskRecord` (the same seed picks the same one)."""
    return cast(Sequence[TaskRecord], host().make("datasets", dataset_id, **config))


def make_engine(engine_id: str, /, *, run: RunConfig, resume: str | Path | None = None) -> Engine:
    """Build a registered training engine from a run config (as ``vista train`` does); the engine
    follows :class:`vista_rl.Engine`: ``validate()`` then ``run()``."""
    from vista_rl._engine_build import build_engine

    if run.engine != engine_id:
        run = run.model_copy(update={"engine": engine_id})
    return build_engine(run, resume)


def train(config: ConfigLike | None = None, *, engine: str | None = None, overrides: Iterable[str] = (),
          resume: str | Path | None = None, strict: bool | None = None) -> RunResult:
    """Train from Python as ``vista train`` does; returns the run directory, the engine's summary
    (held-out ``evals``), the last step's metrics and the trained model's path.

    ``config`` is a :class:`~vista_rl.config.RunConfig`, a YAML path or a dict; ``overrides`` are
    ``key=value`` strings as ``--set`` takes them; ``engine`` overrides the config's ``engine``
    (default ``local``); ``resume`` continues the run in that directory; ``strict`` refuses a config
    that names code outside the installed VISTA plugins.  See :mod:`vista_rl.api`."""
    from vista_rl.api import train as run_train

    return run_train(config, engine=engine, overrides=overrides, resume=resume, strict=strict)


def evaluate(config: ConfigLike | None = None, *, env: str | None = None, model: str | None = None,
             overrides: Iterable[str] = (), backend: ModelBackend | None = None, html: bool = True,
             resume: bool = False, overwrite: bool = False, console: Console | None = None,
             strict: bool | None = None) -> EvalResult:
    """Evaluate from Python as ``vista eval`` does (``env="sokoban/sokoban-v0",
    model="scripted:oracle"``, or a config); returns the summary numbers and the run directory.
    Without ``rollout.max_turns`` episodes play the env's own turn limit.  See :mod:`vista_rl.api`."""
    from vista_rl.api import evaluate as run_evaluate

    return run_evaluate(config, env=env, model=model, overrides=overrides, backend=backend, html=html,
                        resume=resume, overwrite=overwrite, console=console, strict=strict)


__all__ = [
    "IMAGE_PLACEHOLDER",
    "AdvantageBatch",
    "AdvantageEstimator",
    "AdvantageOutput",
    "Chat",
    "ConfigError",
    "DuplicateItemError",
    "Engine",
    "EnginePlan",
    "Env",
    "EnvWrapper",
    "declared_actions",
    "EvalResult",
    "Generation",
    "ItemSpec",
    "Judge",
    "JudgeResult",
    "LoggerWarning",
    "MetricsLogger",
    "Message",
    "ModelBackend",
    "ModelFamily",
    "Observation",
    "ParsedResponse",
    "ParsedToolCall",
    "PluginHost",
    "PluginInfo",
    "PluginLoadError",
    "Register",
    "RegisterDataset",
    "RegisterEngine",
    "RegisterEnv",
    "RegisterEstimator",
    "RegisterJudge",
    "RegisterLogger",
    "RegisterModel",
    "RegisterModelFamily",
    "RegisterTool",
    "ResponseFormat",
    "RunLoggers",
    "RunResult",
    "RunStatus",
    "SamplingParams",
    "StepResult",
    "TaskRecord",
    "TokenView",
    "Tool",
    "ToolCallRecord",
    "ToolContext",
    "ToolResult",
    "Trajectory",
    "Turn",
    "UnknownItemError",
    "VistaError",
    "count_placeholders",
    "escape_placeholders",
    "evaluate",
    "flat_config",
    "episode_seed",
    "get_plugins",
    "hookimpl",
    "hookspec",
    "host",
    "image_to_data_url",
    "is_import_path",
    "load_plugins",
    "make_dataset",
    "make_engine",
    "make_env",
    "make_estimator",
    "make_judge",
    "make_logger",
    "make_model",
    "make_tool",
    "normalize_answer",
    "strip_reasoning",
    "observation_fingerprint",
    "parse_response",
    "scalar_metrics",
    "split_actions",
    "train",
    "resolve_import_path",
    "check_estimator_config",
    "check_loggers",
    "config_fields",
]

"""VISTA: plugin-based training and evaluation of VLM agents with multi-turn, tool-integrated RL.

``import vista_rl`` runs no plugin code: plugins are discovered on the first registry query.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vista_rl.engine_contract import Engine, EnginePlan
from vista_rl.env import Env, StepResult
from vista_rl.errors import ConfigError, DuplicateItemError, PluginLoadError, UnknownItemError, VistaError
from vista_rl.hookspecs import hookimpl, hookspec
from vista_rl.judge import Judge, JudgeResult
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import IMAGE_PLACEHOLDER, Message, Observation
from vista_rl.parsing import ParsedResponse, ResponseFormat, parse_response
from vista_rl.plugins import get_plugins, host, load_plugins
from vista_rl.task import TaskRecord
from vista_rl.tool import Tool, ToolContext, ToolResult
from vista_rl.trajectory import TokenView, Trajectory, Turn

__version__ = "0.1.0"

if TYPE_CHECKING:
    from vista_rl.config import RunConfig


def make_env(env_id: str, /, **config: Any) -> Env:
    """Create a registered environment, like ``gymnasium.make``."""
    return host().make("envs", env_id, **config)  # type: ignore[no-any-return]


def make_tool(tool_id: str, /, **config: Any) -> Tool:
    return host().make("tools", tool_id, **config)  # type: ignore[no-any-return]


def make_judge(judge_id: str, /, **config: Any) -> Judge:
    return host().make("judges", judge_id, **config)  # type: ignore[no-any-return]


def make_estimator(estimator_id: str, /, **params: Any) -> Any:
    """The estimator function, with ``params`` bound when given."""
    return host().make("estimators", estimator_id, **params)


def make_model(model_id: str, /, **config: Any) -> ModelBackend:
    return host().make("models", model_id, **config)  # type: ignore[no-any-return]


def make_dataset(dataset_id: str, /, **config: Any) -> Any:
    return host().make("datasets", dataset_id, **config)


def make_engine(engine_id: str, /, *, run: RunConfig, resume: str | Path | None = None) -> Engine:
    """Build a registered training engine from a run config (as ``vista train`` does); the engine
    follows :class:`vista_rl.Engine`: ``validate()`` then ``run()``."""
    from vista_rl.engine_contract import build_engine

    if run.engine != engine_id:
        run = run.model_copy(update={"engine": engine_id})
    return build_engine(run, resume)


__all__ = [
    "IMAGE_PLACEHOLDER",
    "ConfigError",
    "DuplicateItemError",
    "Engine",
    "EnginePlan",
    "Env",
    "Generation",
    "Judge",
    "JudgeResult",
    "Message",
    "ModelBackend",
    "Observation",
    "ParsedResponse",
    "PluginLoadError",
    "ResponseFormat",
    "SamplingParams",
    "StepResult",
    "TaskRecord",
    "TokenView",
    "Tool",
    "ToolContext",
    "ToolResult",
    "Trajectory",
    "Turn",
    "UnknownItemError",
    "VistaError",
    "get_plugins",
    "hookimpl",
    "hookspec",
    "load_plugins",
    "make_dataset",
    "make_engine",
    "make_env",
    "make_estimator",
    "make_judge",
    "make_model",
    "make_tool",
    "parse_response",
]

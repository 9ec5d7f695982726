"""Run configuration: pydantic models, loaded from YAML, with ``--set key=value`` overrides.

Every error names the offending key (``rollout.max_turns: Input should be greater than 0``), because a
config mistake found after a GPU job starts is the most expensive kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar
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
    id: str
    config: dict[str, Any] = Field(default_factory=dict)


class ModelSection(Section):
    backend: str = "transformers"
    path: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class SamplingSection(Sampling):
    max_tokens: int = Field(128, ge=1)


class RolloutSection(Section):
    max_turns: int = Field(5, ge=1)
    group_size: int = Field(1, ge=1, description="samples per seed (G)")
    window_size: int | None = Field(None, ge=1, description="keep only the last k turns in context")
    max_context_tokens: int | None = Field(None, ge=1)
    reflection: bool = Field(False, description="engine-side reflection: after a wrong final answer, reset the "
                             "env to the same seed and let the model try again with feedback (docs/reflection.md)")
    reflection_attempts: int = Field(1, ge=1, description="tries per episode with reflection, the first included "
                                     "(was max_attempts)")
    env_timeout_s: float = Field(60.0, gt=0)
    tool_timeout_s: float = Field(30.0, gt=0)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    episodes: int = Field(20, ge=1, description="seeds per eval run (B); each runs group_size samples")
    batch_size: int = Field(64, ge=1, description="most episodes alive at once (one model call per turn)")
    max_workers: int | None = Field(None, ge=1, description="env/tool threads (default: batch_size)")
    tool_response_role: Literal["user", "tool"] = Field(
        "user", description="role of the message carrying tool results back to the model")
    describe_tools: bool = Field(True, description="append the env's tool schemas to its system prompt")

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, {"max_attempts": "reflection_attempts"}, "rollout.")

    @property
    def max_attempts(self) -> int:
        """Old name of :attr:`reflection_attempts`, readable until 0.2 (code written before the rename)."""
        return self.reflection_attempts


class RunConfig(Section):
    """The run config every engine receives.  Engines may read extra sections of their own from
    ``engine_config``."""

    engine: str = "local"
    seed: int = 0
    output_dir: str = "runs/run"
    env: EnvSection
    model: ModelSection = Field(default_factory=ModelSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    engine_config: dict[str, Any] = Field(default_factory=dict)


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


def format_validation_error(error: ValidationError, source: str = "config") -> str:
    lines = [f"invalid {source}:"]
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
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

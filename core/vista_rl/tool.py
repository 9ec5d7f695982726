"""The tool contract: a pydantic argument model (its JSON schema is the OpenAI function schema) and
a call that returns text and/or images.

``Tool.__call__`` never raises for bad arguments or a crashing implementation: the model gets a
clear error text back as the tool result, so a rollout keeps going and the mistake is trainable.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from PIL import Image
from pydantic import BaseModel, ValidationError


@dataclass
class ToolContext:
    """What a tool may see of the episode: every image so far, in order (index 0 is the first
    observation's first image), so crop/zoom can always cut from the original."""

    images: list[Image.Image] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolResult:
    text: str = ""
    images: list[Image.Image] = field(default_factory=list)
    error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


class Tool(abc.ABC):
    """Base class of tools.  Subclasses set ``name``, ``description`` and ``Arguments``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Arguments: ClassVar[type[BaseModel]] = BaseModel

    @abc.abstractmethod
    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        """Do the work with validated arguments (an instance of ``Arguments``)."""

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools=[...]`` entry."""
        schema = self.Arguments.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def __call__(self, arguments: dict[str, Any] | str | None, context: ToolContext | None = None) -> ToolResult:
        context = context or ToolContext()
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError) as exc:  # bad JSON, a too-long integer, nesting too deep
                reason = getattr(exc, "msg", None) or type(exc).__name__
                return ToolResult(text=f"Error: arguments for {self.name} are not valid JSON ({reason}).", error=True)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return ToolResult(text=f"Error: arguments for {self.name} must be a JSON object.", error=True)
        try:
            parsed = self.Arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
            )
            return ToolResult(text=f"Error: bad arguments for {self.name}: {problems}.", error=True)
        try:
            return self.run(parsed, context)
        except Exception as exc:  # noqa: BLE001 - a tool bug becomes feedback, not a crash
            return ToolResult(text=f"Error: {self.name} failed: {type(exc).__name__}: {exc}", error=True)

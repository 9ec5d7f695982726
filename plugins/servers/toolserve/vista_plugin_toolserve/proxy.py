"""``ServedTool``: the stand-in a rollout uses for a tool that runs elsewhere.

It has the remote tool's name, description and JSON schema (so prompts and tool listings are the
same as in-process), and hands each call to a transport (Ray actors, HTTP).  Validation happens
where the tool lives; anything that goes wrong on the way (a dead worker, a timeout, a broken
connection) comes back as an error result the model reads, never as an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from vista_rl import Tool, ToolContext, ToolResult


class ToolTransport(Protocol):
    """Where a served tool's calls go."""

    tool_id: str

    def schema(self) -> dict[str, Any]:
        """The tool's OpenAI function entry."""

    def call(self, arguments: Any, context: ToolContext) -> ToolResult:
        """Run one call remotely; failures come back as error results."""

    def close(self) -> None:
        """Release workers or connections."""


class ServedTool(Tool):
    """A tool whose work happens behind ``transport``; use :func:`served_tool` to make one.

    ``on_close`` is called with the tool when it closes: the maker's per-process cache
    (:mod:`~vista_plugin_toolserve.services`) passes its ``forget`` there, so this module needs no
    import of the cache (which imports this one)."""

    def __init__(self, transport: ToolTransport, schema: dict[str, Any],
                 on_close: Callable[[ServedTool], None] | None = None) -> None:
        self.transport = transport
        self._schema = schema
        self._on_close = on_close

    def openai_schema(self) -> dict[str, Any]:
        """The transport's current schema: an HTTP transport made while its server was down
        learns the real one when the server answers (the name stays what prompts already use)."""
        return self.transport.schema() or self._schema

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:  # pragma: no cover - __call__ bypasses it
        return self.transport.call(arguments, context)

    def __call__(self, arguments: dict[str, Any] | str | None, context: ToolContext | None = None) -> ToolResult:
        try:
            return self.transport.call(arguments, context or ToolContext())
        except Exception as exc:  # noqa: BLE001 - transports should not raise; this guards one that does
            return ToolResult(text=f"Error: {self.name} (served) failed: {type(exc).__name__}: {exc}", error=True)

    def close(self) -> None:
        """Stop the transport (actors, managed server); a later request for the same served tool
        makes a fresh one."""
        if self._on_close is not None:
            self._on_close(self)
        self.transport.close()


def served_tool(transport: ToolTransport, on_close: Callable[[ServedTool], None] | None = None) -> ServedTool:
    """A :class:`ServedTool` named and described like the remote tool (a subclass per tool, since
    ``name`` and ``description`` are class attributes of :class:`vista_rl.Tool`)."""
    schema = transport.schema()
    function = schema.get("function") or {}
    name = str(function.get("name") or transport.tool_id)
    cls = type(f"Served[{name}]", (ServedTool,), {"name": name, "description": str(function.get("description", ""))})
    return cls(transport, schema, on_close)

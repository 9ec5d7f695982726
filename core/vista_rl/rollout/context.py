"""What the model sees each turn: the system prompt (with tool schemas) and the full history or a
window of the last turns (VAGEN's ``window_size``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from PIL import Image

from vista_rl.observation import IMAGE_PLACEHOLDER, Message, escape_tool_text
from vista_rl.tool import Tool, ToolResult


def tools_prompt(tools: Mapping[str, Tool]) -> str:
    """The calling convention and one JSON schema per tool, appended to the env's system prompt."""
    lines = [
        "You can call tools. To call one, reply with",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "and its result comes back in the next message. Available tools:",
    ]
    for name, tool in tools.items():
        schema = tool.openai_schema()["function"]
        lines.append(json.dumps({"name": name, "description": schema["description"],
                                 "parameters": schema["parameters"]}, sort_keys=True))
    return "\n".join(lines)


def window_start(turn: int, window_size: int | None) -> int:
    """The first turn (0-based) the model sees at turn ``turn``: a window of ``k`` shows the last ``k``
    earlier turns (VAGEN's ``window_size``), ``None`` all of them.  The one rule of the context window:
    the rollout's prompts (:func:`window`) and both engines' SFT examples cut turns with it, so SFT
    trains on exactly the contexts RL and evaluation show."""
    if turn < 0:
        raise ValueError(f"turn {turn} is negative")
    if window_size is None:
        return 0
    if window_size < 0:
        raise ValueError(f"window_size {window_size} is negative (0 shows only the current turn, null every turn)")
    return max(0, turn - window_size)


def window(history: Sequence[Message], window_size: int | None) -> list[Message]:
    """``history`` alternates user, assistant, user, ... and ends with a user message (turn ``n`` after
    ``n`` exchanges).  The messages of the turns :func:`window_start` keeps, the current one last."""
    turn = len(history) // 2
    keep = 2 * (turn - window_start(turn, window_size)) + 1
    return list(history[-keep:])


def messages_after_last_assistant(chat: Sequence[Message]) -> list[Message]:
    """The messages a prompt added since the model last spoke (all of them on the first turn)."""
    for index in range(len(chat) - 1, -1, -1):
        if chat[index].role == "assistant":
            return list(chat[index + 1:])
    return list(chat)


def tool_results_message(
    results: Sequence[tuple[str, ToolResult]], role: str,
) -> Message:
    """One message carrying every tool result of a turn: text in ``<tool_response>`` blocks, each
    image as a placeholder right after its tool's text."""
    parts: list[str] = []
    images: list[Image.Image] = []
    for name, result in results:
        body = escape_tool_text(result.text or ("(no text)" if not result.images else ""))
        slots = "".join(f"\n{IMAGE_PLACEHOLDER}" for _ in result.images)
        parts.append(f"<tool_response>\n{escape_tool_text(name)}: {body}{slots}\n</tool_response>")
        images.extend(result.images)
    return Message(role="tool" if role == "tool" else "user", content="\n".join(parts), images=images)

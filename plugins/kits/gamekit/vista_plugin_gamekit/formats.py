"""VAGEN's prompt formats: which tags a response needs, how to describe them, how to write one.

``free_think`` and ``no_think`` are flat; the other three put sub-tags inside ``<think>``
(``grounding``: observation + reasoning, ``worldmodeling``: reasoning + prediction,
``grounding_worldmodeling``: all three), then ``<answer>``.  Keeping the table in one place means the
parser's required tags, the system prompt and the oracle's responses can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vista_rl import ResponseFormat

PromptFormat = Literal["free_think", "no_think", "grounding", "worldmodeling", "grounding_worldmodeling"]
PROMPT_FORMATS: tuple[str, ...] = ("free_think", "no_think", "grounding", "worldmodeling",
                                   "grounding_worldmodeling")

_INNER: dict[str, tuple[str, ...]] = {
    "free_think": (),
    "no_think": (),
    "grounding": ("observation", "reasoning"),
    "worldmodeling": ("reasoning", "prediction"),
    "grounding_worldmodeling": ("observation", "reasoning", "prediction"),
}
_TAG_HINTS: dict[str, str] = {
    "think": "your reasoning",
    "observation": "describe the current state: where you are and where the key objects are relative to you",
    "reasoning": "your plan",
    "prediction": "describe the state after your actions have run",
    "answer": "your action(s)",
}


@dataclass(frozen=True)
class FormatSpec:
    name: str
    inner: tuple[str, ...]
    thinks: bool

    @property
    def required(self) -> tuple[str, ...]:
        return (("think",) if self.thinks else ()) + self.inner + ("answer",)

    def response_format(self, strict: bool) -> ResponseFormat:
        return ResponseFormat(required=self.required, strict=strict)

    def skeleton(self) -> str:
        """``<think><observation>...</observation>...</think><answer>...</answer>``."""
        inner = "".join(f"<{tag}>...</{tag}>" for tag in self.inner) or "..."
        return (f"<think>{inner}</think>" if self.thinks else "") + "<answer>...</answer>"

    def compose(self, answer: str, *, think: str = "", observation: str = "", reasoning: str = "",
                prediction: str = "") -> str:
        """A well-formed response; ``think`` is used by ``free_think``, the parts by the others."""
        if not self.thinks:
            return f"<answer>{answer}</answer>"
        parts = {"observation": observation, "reasoning": reasoning, "prediction": prediction}
        body = "".join(f"<{tag}>{parts[tag]}</{tag}>" for tag in self.inner) if self.inner else think
        return f"<think>{body}</think><answer>{answer}</answer>"

    def instructions(self, action_sep: str, max_actions: int, example_answer: str) -> str:
        """The format paragraph of a system prompt (VAGEN's wording, our text)."""
        lines = [f"You can take up to {max_actions} action(s) at a time, separated by {action_sep!r}."]
        tags = ", ".join(f"<{tag}> {_TAG_HINTS[tag]}" for tag in self.required)
        lines.append(f"Your response must be exactly: {self.skeleton()} ({tags}).")
        example = self.compose(
            example_answer,
            think="The box is below me, so I step around it and push it down.",
            observation="The box is one row below and one column left of the player.",
            reasoning="Step left, then push the box down onto the target.",
            prediction="The box is on the target, directly below the player.",
        )
        lines.append(f"e.g. {example}")
        return "\n".join(lines)


def format_spec(name: str) -> FormatSpec:
    if name not in _INNER:
        raise ValueError(f"unknown prompt_format {name!r}; expected one of {', '.join(PROMPT_FORMATS)}")
    return FormatSpec(name=name, inner=_INNER[name], thinks=name != "no_think")

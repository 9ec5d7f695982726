"""The search tree: thought-step nodes with Monte-Carlo values, and their JSON form.

Field names follow ViGoRL's serialised trees (``thought_text``, ``value``, ``visit_count``,
``rollouts[].ephemeral_texts``, ``rollouts[].reward``, ``is_terminal``, ``children``) so a tree
written by either side can be linearised by the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Rollout:
    """One ephemeral continuation from a node (not part of the tree): every thought from the root's
    first step to the answer, the last element being ``<answer> … </answer>``."""

    ephemeral_texts: list[str]
    answer: str | None
    reward: float

    def to_dict(self) -> dict[str, Any]:
        return {"ephemeral_texts": list(self.ephemeral_texts), "answer": self.answer, "reward": self.reward}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollout:
        return cls([str(t) for t in data.get("ephemeral_texts", [])], data.get("answer"),
                   float(data.get("reward", 0.0)))


@dataclass
class TreeNode:
    """A thought step.  ``value`` is the running mean of the 0/1 outcomes backed up through it."""

    thought_text: str = ""
    depth: int = 0
    parent: TreeNode | None = field(default=None, repr=False)
    children: list[TreeNode] = field(default_factory=list)
    value: float = 0.0
    visit_count: int = 0
    rollouts: list[Rollout] = field(default_factory=list)
    used_coords: list[tuple[int, int]] = field(default_factory=list)
    is_terminal: bool = False
    answer: str | None = None
    reward: float | None = None  # set once for a terminal node

    def update_value(self, reward: float) -> None:
        """Incremental mean: ``value += (r - value) / N``."""
        self.visit_count += 1
        self.value += (reward - self.value) / self.visit_count

    def ucb(self, c: float) -> float:
        """``value + c·sqrt(ln(N_parent + 1) / (N + 1))``."""
        parent_visits = self.parent.visit_count if self.parent is not None else self.visit_count
        return self.value + c * math.sqrt(math.log(parent_visits + 1) / (self.visit_count + 1))

    def path(self) -> list[TreeNode]:
        """Root first, this node last."""
        nodes: list[TreeNode] = []
        node: TreeNode | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def thoughts(self) -> list[str]:
        """The thought texts from the root's first child down to this node."""
        return [node.thought_text for node in self.path()[1:]]

    def size(self) -> int:
        return 1 + sum(child.size() for child in self.children)

    def to_dict(self) -> dict[str, Any]:
        return {
            "thought_text": self.thought_text,
            "depth": self.depth,
            "value": self.value,
            "visit_count": self.visit_count,
            "is_terminal": self.is_terminal,
            "answer": self.answer,
            "reward": self.reward,
            "used_coords": [list(c) for c in self.used_coords],
            "rollouts": [r.to_dict() for r in self.rollouts],
            "children": [child.to_dict() for child in self.children],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], parent: TreeNode | None = None) -> TreeNode:
        node = cls(thought_text=str(data.get("thought_text", "")), depth=int(data.get("depth", 0)), parent=parent,
                   value=float(data.get("value", 0.0)), visit_count=int(data.get("visit_count", 0)),
                   rollouts=[Rollout.from_dict(r) for r in data.get("rollouts", [])],
                   used_coords=[(int(c[0]), int(c[1])) for c in data.get("used_coords", [])],
                   is_terminal=bool(data.get("is_terminal", False)), answer=data.get("answer"),
                   reward=data.get("reward"))
        node.children = [cls.from_dict(child, node) for child in data.get("children", [])]
        return node

"""Trajectories: what happened in an episode (for people, judges and logs) and its token view (for
trainers).  Images live in memory while an episode runs; the trajectory store writes them to files
and keeps only their content hashes in ``image_refs``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from PIL import Image


@dataclass
class ToolCallRecord:
    name: str
    arguments: Any
    result_text: str = ""
    num_images: int = 0
    error: bool = False


@dataclass
class Turn:
    """One model turn: the observation it answered, its response, and what followed."""

    observation: str
    response: str
    reward: float = 0.0
    images: list[Image.Image] = field(default_factory=list, repr=False)
    image_refs: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class TokenView:
    """The training view of a trajectory.

    ``input_ids`` covers the whole conversation; ``loss_mask`` is 1 on assistant tokens only;
    ``turn_ends`` are indices of each assistant turn's last token; ``turn_rewards`` one per turn;
    ``logprobs`` the sampling logprobs on assistant tokens (0 elsewhere) when the backend gave them.
    Images appear in ``image_refs`` in placeholder order.
    """

    input_ids: list[int]
    loss_mask: list[int]
    turn_ends: list[int]
    turn_rewards: list[float]
    logprobs: list[float] | None = None
    image_refs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.input_ids) != len(self.loss_mask):
            raise ValueError("input_ids and loss_mask must have the same length")
        if len(self.turn_ends) != len(self.turn_rewards):
            raise ValueError("one turn reward per turn end is required")


@dataclass
class Trajectory:
    """A whole episode."""

    env_id: str
    seed: int | None
    sample_index: int = 0
    system_prompt: str = ""
    initial_observation: str = ""
    initial_images: list[Image.Image] = field(default_factory=list, repr=False)
    initial_image_refs: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    failure: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    token_view: TokenView | None = None

    @property
    def total_reward(self) -> float:
        return float(sum(turn.reward for turn in self.turns))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (images are left out; the store writes them as files first)."""
        data = asdict(self)
        data.pop("initial_images", None)
        for turn in data["turns"]:
            turn.pop("images", None)
        data["total_reward"] = self.total_reward
        data["num_turns"] = self.num_turns
        return data

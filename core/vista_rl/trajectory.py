"""Trajectories: what happened in an episode (for people, judges and logs) and its token view (for
trainers).  Images live in memory while an episode runs; the trajectory store writes them to files
and keeps only their content hashes in ``image_refs``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
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
    #: Role of the message the response answered: ``"user"`` (env observations, feedback) or
    #: ``"tool"`` (tool results under ``rollout.tool_response_role: tool``), so SFT renders it as seen.
    observation_role: str = "user"

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "images"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        known = {f.name for f in fields(cls)} - {"images", "tool_calls"}
        calls = [ToolCallRecord(**call) for call in data.get("tool_calls", [])]
        return cls(**{key: value for key, value in data.items() if key in known}, tool_calls=calls)


#: TokenView fields that live in memory during a run only.
_IN_MEMORY = {"images", "image_inputs"}


@dataclass
class TokenView:
    """The training view of a trajectory.

    ``input_ids`` covers the whole conversation; ``loss_mask`` is 1 on assistant tokens only;
    ``turn_ends`` are indices of each assistant turn's last token; ``turn_rewards`` one per turn;
    ``logprobs`` the sampling logprobs on assistant tokens (0 elsewhere) when the backend gave them.
    Images appear in ``image_refs`` in placeholder order.

    How the rollout engine builds it (``vista_rl.rollout.token_view``): ``prompt_length`` is the length
    of the first turn's prompt (system + first observation, ending with the generation prompt), so
    ``input_ids[:prompt_length]`` is verl's "prompt" and the rest its "response".  ``turn_starts``
    are the indices of each assistant turn's first generated token.  ``alignment`` says, per turn
    after the first, how the template tokens between two generations were found ("exact": the new
    prompt extended the sequence token for token; "aligned": the window dropped history and the
    previous generation was found in the new prompt; "retokenized": the template re-tokenized the
    previous response differently and its end-of-turn token was used as the anchor).  ``images``
    holds the PIL images in memory during a run (never serialised); ``image_inputs``, one per image
    when the backend returned them (``Generation.encoded_images``), what its encoder built for them
    (the local engine's pixel tensors; never serialised).
    """

    input_ids: list[int]
    loss_mask: list[int]
    turn_ends: list[int]
    turn_rewards: list[float]
    logprobs: list[float] | None = None
    image_refs: list[str] = field(default_factory=list)
    prompt_length: int = 0
    turn_starts: list[int] = field(default_factory=list)
    alignment: list[str] = field(default_factory=list)
    images: list[Image.Image] = field(default_factory=list, repr=False, compare=False)
    image_inputs: list[Any] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.input_ids) != len(self.loss_mask):
            raise ValueError("input_ids and loss_mask must have the same length")
        if len(self.turn_ends) != len(self.turn_rewards):
            raise ValueError("one turn reward per turn end is required")
        if self.logprobs is not None and len(self.logprobs) != len(self.input_ids):
            raise ValueError("logprobs must have one entry per token of input_ids")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in _IN_MEMORY}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenView:
        known = {f.name for f in fields(cls)} - _IN_MEMORY
        return cls(**{key: value for key, value in data.items() if key in known})


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
    #: One view per turn, each the whole context that turn answered (``rollout.sequences: turn``).
    turn_views: list[TokenView] = field(default_factory=list)

    @property
    def total_reward(self) -> float:
        return float(sum(turn.reward for turn in self.turns))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (images are left out; the store writes them as files first).  Built field
        by field rather than with ``dataclasses.asdict``, which would deep-copy every image."""
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "initial_images":
                continue
            value = getattr(self, f.name)
            if f.name == "turns":
                value = [turn.to_dict() for turn in self.turns]
            elif f.name == "token_view":
                value = self.token_view.to_dict() if self.token_view is not None else None
            elif f.name == "turn_views":
                value = [view.to_dict() for view in self.turn_views]
            else:
                value = _plain(value)
            data[f.name] = value
        data["total_reward"] = self.total_reward
        data["num_turns"] = self.num_turns
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """Rebuild a trajectory from :meth:`to_dict` output (images stay as ``image_refs``)."""
        known = {f.name for f in fields(cls)} - {"initial_images", "turns", "token_view", "turn_views"}
        kwargs = {key: value for key, value in data.items() if key in known}
        turns = [Turn.from_dict(turn) for turn in data.get("turns", [])]
        view = data.get("token_view")
        turn_views = [TokenView.from_dict(item) for item in data.get("turn_views") or []]
        return cls(**kwargs, turns=turns, token_view=TokenView.from_dict(view) if view else None,
                   turn_views=turn_views)


def _plain(value: Any) -> Any:
    """A JSON-ready copy of dataclasses, lists and dicts (images are never reached)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value

"""The model-backend (policy) contract: batched chats with images in; text, token ids and logprobs
out.  Every backend (transformers, vLLM, OpenAI-compatible servers, scripted) speaks it, so the
rollout engine never knows which one it drives."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from vista_rl.observation import Chat


class Sampling(BaseModel):
    """The sampling settings a run config sets (``rollout.sampling``)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0.0, description="softmax temperature (0: greedy)")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling: the smallest token set with this mass")
    max_tokens: int = Field(256, ge=1, description="most new tokens per call")
    stop: list[str] = Field(default_factory=list, description="strings that end a completion")


class SamplingParams(Sampling):
    """What a backend call takes: the run's sampling settings plus samples per chat and a seed."""

    n: int = Field(1, ge=1)
    seed: int | None = None


@dataclass
class Generation:
    """One sampled completion."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str = "stop"
    metadata: dict[str, Any] = field(default_factory=dict)
    #: What the backend's encoder built for each image of the prompt, in placeholder order (the local
    #: engine: the pixel tensors it sampled from), or ``None``.  The token view keeps the entries of
    #: the images it lists, so a trainer scores exactly what was sampled without a side cache.
    #: Held in memory only, never serialised.
    encoded_images: list[Any] | None = field(default=None, repr=False, compare=False)


class ModelBackend(abc.ABC):
    """Base class of VLM backends."""

    @abc.abstractmethod
    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        """For each chat, ``params.n`` generations.  A backend that cannot answer one chat may put
        the exception in that chat's place: the rollout engine fails that episode alone, with the
        error recorded, and the rest of the batch goes on."""

    def close(self) -> None:
        """Release the model or connection."""


@runtime_checkable
class EpisodeStateBackend(Protocol):
    """A backend that keeps state per episode between its turns, such as the KV cache of the
    conversation so far, so that a turn computes only what it adds (the transformers backend and
    the local engine's policy).  The rollout engine gives such a backend
    ``generate(chats, params, episode_keys=[...])``, one key per chat, unique per episode, and calls
    :meth:`end_episodes` as soon as episodes finish, so their state is freed at once.  A backend's
    output must not depend on the keys (greedy replies are those of a backend without them)."""

    def end_episodes(self, keys: Sequence[str]) -> None:
        """These episodes are over: free what is kept for them (unknown keys are ignored)."""

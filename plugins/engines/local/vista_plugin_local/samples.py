"""From rollout trajectories to training samples: the token view plus the processor tensors.

The rollout engine records each episode's :class:`~vista_rl.trajectory.TokenView` (sampled ids,
assistant-only loss mask, turn ends, per-turn rewards, image refs) and, in ``image_inputs``, the
exact pixel tensors the policy backend sampled from.  An episode that failed (env, tool or model error, recorded in
``Trajectory.failure``) or has no usable token view is left out of the update and reported, so one
broken env costs one sample, never the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.policy_backend import PolicyBackend
from vista_rl import TokenView, Trajectory
from vista_rl.rollout import EpisodeStats


@dataclass
class TrainSample:
    """One episode (or, with per-turn sequences, one turn of it) ready for the loss: tokens (with
    images), its GRPO group and turn rewards."""

    trajectory: Trajectory
    tokens: EpisodeTokens
    group: int
    turn_rewards: list[float] = field(default_factory=list)
    #: Which turn of the episode this sample is (per-turn sequences); ``None``: the whole episode.
    turn_index: int | None = None

    @property
    def success(self) -> bool:
        return self.trajectory.success

    @property
    def response_tokens(self) -> int:
        return int(sum(self.tokens.loss_mask))


@dataclass
class SampleBatch:
    samples: list[TrainSample]
    #: Episodes left out of the update, each with the reason.
    dropped: list[tuple[Trajectory, str]]


def why_untrainable(trajectory: Trajectory, per_turn: bool = False) -> str | None:
    if trajectory.failure:
        return f"episode failed: {trajectory.failure}"
    if (not trajectory.turn_views) if per_turn else (trajectory.token_view is None):
        reason = trajectory.metadata.get("token_view_error") or "no model turn"
        return f"no token view: {reason}"
    if per_turn and len(trajectory.turn_views) != trajectory.num_turns:
        return f"{len(trajectory.turn_views)} turn views for {trajectory.num_turns} turns"
    return None


def _view_tokens(view: TokenView, backend: PolicyBackend) -> EpisodeTokens:
    """The view's ids with the processor tensors of its images (ValueError if they disagree)."""
    images = list(view.image_inputs)
    if len(images) != len(view.image_refs):
        raise ValueError(f"the token view has {len(view.image_refs)} image(s) but the policy backend handed "
                         f"over the tensors of {len(images)}")
    tokens = EpisodeTokens(list(view.input_ids), list(view.loss_mask), list(view.turn_ends), images)
    expected = sum(backend.encoder.vision_tokens(image) for image in images)
    found = sum(1 for token in tokens.input_ids if token == backend.encoder.image_token_id)
    if expected != found:
        raise ValueError(f"token view has {found} image tokens but its images need {expected}")
    return tokens


def training_samples(trajectories: Sequence[Trajectory], backend: PolicyBackend,
                     per_turn: bool = False) -> SampleBatch:
    """Samples of the trainable trajectories (one per episode, or one per turn with ``per_turn``);
    samples of one seed share a group index."""
    groups: dict[str, int] = {}
    samples: list[TrainSample] = []
    dropped: list[tuple[Trajectory, str]] = []
    for trajectory in trajectories:
        reason = why_untrainable(trajectory, per_turn)
        views = trajectory.turn_views if per_turn else [trajectory.token_view]
        pieces: list[tuple[EpisodeTokens, TokenView]] = []
        if reason is None:
            try:
                pieces = [(_view_tokens(view, backend), view) for view in views if view is not None]
            except ValueError as exc:
                reason = str(exc)
        if reason is not None:
            dropped.append((trajectory, reason))
            continue
        key = EpisodeStats.from_metadata(trajectory.metadata).group_id or f"{trajectory.env_id}:{trajectory.seed}"
        group = groups.setdefault(key, len(groups))
        for index, (tokens, view) in enumerate(pieces):
            samples.append(TrainSample(trajectory, tokens, group, list(view.turn_rewards),
                                       index if per_turn else None))
    return SampleBatch(samples, dropped)

"""SFT examples: token views of whole trajectories, loss on the assistant turns only.

Two sources: oracle rollouts played by the env itself (``Env.oracle_response``), or any trajectory
JSONL written by the trajectory store (images as ``<ref>.png`` files next to the JSONL or in its
``images/`` folder).  Broken rows are skipped and reported with their line numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from PIL import Image

from vista_plugin_local.chat_tokens import ChatEncoder, EpisodeTokens
from vista_rl import Message, Trajectory, VistaError, escape_placeholders
from vista_rl.rollout import window_start


@dataclass
class JsonlLoadReport:
    rows: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def summary(self) -> str:
        if not self.skipped:
            return f"{self.rows} trajectories"
        shown = "; ".join(f"line {line}: {why}" for line, why in self.skipped[:5])
        more = f" (and {len(self.skipped) - 5} more)" if len(self.skipped) > 5 else ""
        return f"{self.rows} trajectories, skipped {len(self.skipped)} broken rows: {shown}{more}"


def _load_image(base: Path, ref: str) -> Image.Image:
    for candidate in (base / "images" / f"{ref}.png", base / f"{ref}.png", base / ref, Path(ref)):
        if candidate.is_file():
            with Image.open(candidate) as image:
                return image.convert("RGB")
    raise FileNotFoundError(f"image {ref!r} not found next to the JSONL or in its images/ folder")


class TurnPiece(NamedTuple):
    """One turn for SFT: the observation the response answered (with its images and the role of
    its message: ``"tool"`` for tool results shown in the tool role), and the response."""

    observation: str
    images: list[Image.Image]
    response: str
    role: str = "user"


def turns_chat(system: str, turns: Sequence[TurnPiece]) -> list[Message]:
    """The conversation of ``turns`` as the rollout engine showed it (system, then each observation
    in its role and the assistant's response)."""
    chat = [Message("system", system)] if system else []
    for piece in turns:
        chat.append(Message(piece.role, piece.observation, list(piece.images)))  # type: ignore[arg-type]
        chat.append(Message("assistant", escape_placeholders(piece.response)))
    return chat


def tokens_from_turns(system: str, turns: Sequence[TurnPiece], encoder: ChatEncoder,
                      train_from: int = 0) -> EpisodeTokens:
    """Token view of ``(observation, images, response, role)`` turns, where each observation is the
    one the response *answered* (``Turn.observation``'s meaning everywhere: rollouts, experts, the
    store), rendered by the same walk as RL prompts and ``vista serve`` (:meth:`ChatEncoder.render`);
    the loss covers the responses from index ``train_from`` on (earlier ones are context)."""
    chat = turns_chat(system, turns)
    offset = 1 if system else 0  # turn k's response is message 2k + 1 + offset

    def turn_of(index: int) -> int:
        return (index - 1 - offset) // 2

    return encoder.render(chat, add_generation_prompt=False,
                          reply_ids=lambda index: encoder.response_ids(turns[turn_of(index)].response),
                          trainable=lambda index: turn_of(index) >= train_from)


def examples_from_turns(system: str, turns: Sequence[TurnPiece], encoder: ChatEncoder,
                        per_turn: bool = False, window_size: int | None = None) -> list[EpisodeTokens]:
    """SFT examples of one episode: the whole episode as one sequence, or (``per_turn``) one sequence
    per turn holding what the rollout engine shows that turn (the last ``window_size`` exchanges as
    context, untrained, then the turn itself: the rollout's rule, :func:`vista_rl.rollout.window_start`),
    so SFT trains on the contexts RL and evaluation use."""
    if not per_turn:
        return [tokens_from_turns(system, turns, encoder)]
    examples = []
    for index in range(len(turns)):
        start = window_start(index, window_size)
        examples.append(tokens_from_turns(system, turns[start:index + 1], encoder, train_from=index - start))
    return examples


def trajectory_pieces(trajectory: Trajectory) -> list[TurnPiece]:
    """Each turn of an in-memory trajectory (rollout or expert), images from ``Turn.images``."""
    if not trajectory.turns:
        raise ValueError("no turns")
    turns = []
    for index, turn in enumerate(trajectory.turns):
        images = list(turn.images) if turn.images or index else list(trajectory.initial_images)
        turns.append(TurnPiece(turn.observation, images, turn.response, turn.observation_role))
    return turns


def tokens_from_trajectory(trajectory: Trajectory, encoder: ChatEncoder) -> EpisodeTokens:
    """Token view of a whole in-memory trajectory."""
    return tokens_from_turns(trajectory.system_prompt, trajectory_pieces(trajectory), encoder)


def record_pieces(record: dict[str, Any], base: Path) -> list[TurnPiece]:
    """Each turn of one stored trajectory (``Trajectory.to_dict`` form; rows written before
    ``observation_role`` existed read as ``"user"``)."""
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        raise ValueError("no turns")
    pieces: list[TurnPiece] = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("response"), str):
            raise ValueError(f"turn {index} has no response text")
        observation = turn.get("observation")
        if not isinstance(observation, str):
            raise ValueError(f"turn {index} has no observation text")
        refs = turn.get("image_refs") or []
        if index == 0 and not refs:
            refs = record.get("initial_image_refs") or []
        role = turn.get("observation_role", "user")
        if role not in ("user", "tool"):
            raise ValueError(f"turn {index} has observation_role {role!r} (user or tool)")
        pieces.append(TurnPiece(observation, [_load_image(base, str(ref)) for ref in refs], turn["response"], role))
    return pieces


def load_jsonl(path: Path, encoder: ChatEncoder, per_turn: bool = False,
               window_size: int | None = None) -> tuple[list[EpisodeTokens], JsonlLoadReport]:
    if not path.is_file():
        raise VistaError(f"sft.path: {path} does not exist; record trajectories first or use "
                         "sft.source: oracle")
    report = JsonlLoadReport()
    examples: list[EpisodeTokens] = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("row is not a JSON object")
                examples.extend(examples_from_turns(str(record.get("system_prompt") or ""),
                                                    record_pieces(record, path.parent), encoder, per_turn,
                                                    window_size))
                report.rows += 1
            except (ValueError, KeyError, TypeError, OSError) as exc:
                report.skipped.append((line_number, f"{type(exc).__name__}: {exc}"))
    if not examples:
        raise VistaError(f"{path}: no usable trajectories ({report.summary()})")
    return examples, report

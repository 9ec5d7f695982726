"""Answer attempts (VISTA-Gym's multi-attempt episodes): after a wrong answer the env itself explains
what was wrong and the *same* episode goes on, up to ``answer_attempts`` answers.

This is env-side and is not the rollout engine's *reflection* (``rollout.reflection``), which ends
the episode, resets the env to the same seed and starts a new try; the two combine (docs/reflection.md).
``answer_attempts`` was called ``max_attempts`` before 0.1.x; the old key still works until 0.2, with a
warning.  How much a late correct answer earns is a training choice:

- ``first``: only a first-attempt answer earns the reward (later attempts are practice, not credit);
- ``decayed``: attempt k earns ``decay ** (k - 1)``;
- ``last``: a correct answer earns the full reward whenever it comes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vista_rl.config import renamed_keys

RewardMode = Literal["first", "decayed", "last"]


class AnswerAttemptsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_attempts: int = Field(1, ge=1, le=10, description="answers the env accepts per episode; a wrong one "
                                 "gets feedback and the episode goes on (was max_attempts)")
    reward_mode: RewardMode = "last"
    decay: float = Field(0.5, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, {"max_attempts": "answer_attempts"})


def attempt_factor(attempt: int, config: AnswerAttemptsConfig) -> float:
    """Share of the correct-answer reward that attempt number ``attempt`` (1-based) earns."""
    if config.reward_mode == "first":
        return 1.0 if attempt == 1 else 0.0
    if config.reward_mode == "decayed":
        return float(config.decay ** (attempt - 1))
    return 1.0


def numeric_hint(prediction: Any, reference: Any) -> str:
    """"too high"/"too low" with the relative error, when both are numbers (never the answer)."""
    from vista_plugin_judges.numeric import parse_number

    references = reference if isinstance(reference, (list, tuple)) else [reference]
    pred = parse_number(prediction)
    ref = parse_number(references[0]) if references else None
    if pred is None or ref is None:
        return ""
    if ref.value == 0:
        return " Your number is too high." if pred.value > 0 else " Your number is too low."
    error = abs(pred.value - ref.value) / abs(ref.value)
    direction = "too high" if pred.value > ref.value else "too low"
    closeness = " You're close." if error < 0.2 else ""
    return f" Your number is {direction} (off by about {error:.0%}).{closeness}"


def feedback_text(prediction: str, reference: Any, attempts_left: int, tools: tuple[str, ...],
                  used_tools: bool, tags: str) -> str:
    parts = [f"Your answer '{prediction[:80]}' is incorrect.{numeric_hint(prediction, reference)}"]
    if tools and not used_tools:
        parts.append(f"Look more closely; you can call a tool ({', '.join(tools)}) before answering.")
    else:
        parts.append("Check your reasoning against the image again.")
    parts.append("This is your last attempt." if attempts_left == 1 else f"You have {attempts_left} attempts left.")
    parts.append(f"Answer in the format {tags}.")
    return " ".join(parts)

"""VAGEN's state-reward wrapper as an env: any env that reports its true state gets reasoning rewards.

``vista_rl.make_env("worldmodel/state-reward-v0", env="sokoban/sokoban-v0", config={...})`` wraps the
inner env.  After each inner ``step``, if the turn was format-valid (``info["format_ok"]``), the
grounding judge scores the response's ``<observation>`` against ``info["observation_state"]`` (the
true state before the turn) and the world-modeling judge scores ``<prediction>`` against
``info["prediction_state"]`` (after it).  The turn's reward becomes::

    reward = env_reward + grounding_reward_weight * grounding_score
                        + worldmodeling_reward_weight * worldmodeling_score

Because it is the step reward, it lands on this turn's last token in the token view, so turn-level
estimators (``bilevel_gae``, ``turnwise_gae``) credit it to the turn that earned it, and every engine
(local, verl agent loop, evaluation, remote envs) sees it with no change to the core.  ``info`` gets
``grounding_reward`` / ``worldmodeling_reward`` (weighted, VAGEN's metric names), the raw
``grounding_score`` / ``worldmodeling_score``, ``state_reward_details`` and ``judge_errors``.  A turn
that is not format-valid, has no such tag, or has no truth scores 0 and is marked ``skipped``; a
judge that fails or raises scores 0 with the error recorded, and the step goes on.

``use_state_reward: false`` turns all of it off (the ablation flag): the wrapper then passes steps
through unchanged except for zero-valued metrics, so both arms log the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import vista_rl
from vista_rl import EnvWrapper, Judge, JudgeResult, ResponseFormat, StepResult, parse_response

_LENIENT = ResponseFormat(required=(), strict=False)


class StateRewardConfig(BaseModel):
    """Settings of the wrapper (everything but ``env`` and ``config``, which name the inner env)."""

    model_config = ConfigDict(extra="forbid")

    use_state_reward: bool = Field(True, description="score <observation>/<prediction> (the ablation flag)")
    grounding_reward_weight: float = Field(0.5, ge=0.0, description="VAGEN's weight of the grounding score")
    worldmodeling_reward_weight: float = Field(0.5, ge=0.0, description="VAGEN's weight of the world-model score")
    grounding_judge: str = Field("worldmodel/grounding", description="judge id for <observation>")
    worldmodeling_judge: str = Field("worldmodel/worldmodeling", description="judge id for <prediction>")
    judge_config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of both judges")
    grounding_judge_config: dict[str, Any] = Field(default_factory=dict,
                                                   description="keyword arguments of the grounding judge only")
    worldmodeling_judge_config: dict[str, Any] = Field(default_factory=dict,
                                                       description="keyword arguments of the world-model judge only")
    observation_state_key: str = "observation_state"
    prediction_state_key: str = "prediction_state"


class StateRewardEnv(EnvWrapper):
    """See the module docstring."""

    def __init__(self, env: str, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.settings = StateRewardConfig(**settings)
        super().__init__(vista_rl.make_env(env, **dict(config or {})))
        self.judges: dict[str, Judge] = {}
        if self.settings.use_state_reward:
            s = self.settings
            self.judges = {
                "grounding": vista_rl.make_judge(s.grounding_judge, **{**s.judge_config, **s.grounding_judge_config}),
                "worldmodeling": vista_rl.make_judge(s.worldmodeling_judge,
                                                     **{**s.judge_config, **s.worldmodeling_judge_config}),
            }

    # ------------------------------------------------------------------ the contract (the rest: EnvWrapper)
    def step(self, action: str) -> StepResult:
        result = self.inner.step(action)
        try:
            bonus, metrics = self._state_reward(action, result.info)
        except Exception as exc:  # noqa: BLE001 - a reward bug must not end the episode
            bonus, metrics = 0.0, _zero_metrics(f"state reward failed: {type(exc).__name__}: {exc}")
        result.info = {**result.info, **metrics}
        result.reward = float(result.reward) + bonus
        return result

    # ------------------------------------------------------------------ scoring
    def _state_reward(self, action: str, info: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
        if not self.settings.use_state_reward:
            return 0.0, _zero_metrics("use_state_reward is off")
        if info.get("format_ok") is not True:
            return 0.0, _zero_metrics("turn is not format-valid")
        s = self.settings
        parts = {"grounding": ("observation", s.observation_state_key, s.grounding_reward_weight),
                 "worldmodeling": ("prediction", s.prediction_state_key, s.worldmodeling_reward_weight)}
        pending: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        for part, (tag, truth_key, weight) in parts.items():
            text = _tag_text(action, info, tag)
            truth = info.get(truth_key)
            if weight == 0:
                skipped[part] = "weight is 0"
            elif text is None:
                skipped[part] = f"no <{tag}> in the response"
            elif truth is None:
                skipped[part] = f"the env reports no {truth_key}"
            else:
                pending[part] = _submit(self.judges[part], text, truth)  # both queued before either waits
        metrics: dict[str, Any] = {"judge_errors": []}
        details: dict[str, Any] = {}
        bonus = 0.0
        for part, (_, _, weight) in parts.items():
            score = 0.0
            if part in pending:
                result = _collect(pending[part])
                score = min(1.0, max(0.0, float(result.score)))
                error = result.details.get("judge_error") or result.details.get("error")
                if error:
                    metrics["judge_errors"].append(f"{part}: {error}")
                details[part] = _jsonable(result.details)
            else:
                details[part] = {"skipped": skipped[part]}
            metrics[f"{part}_score"] = score
            metrics[f"{part}_reward"] = weight * score
            bonus += weight * score
        metrics["state_reward_details"] = details
        metrics["state_reward"] = bonus
        return bonus, metrics


def _tag_text(action: str, info: Mapping[str, Any], tag: str) -> str | None:
    """The tag's content: the env's own parse when it reports one, else a lenient parse of the reply."""
    parsed = info.get("parsed")
    if isinstance(parsed, Mapping) and tag in parsed:
        value = parsed.get(tag)
    else:
        value = parse_response(action, _LENIENT).get(tag)
    return value if isinstance(value, str) and value.strip() else None


def _submit(judge: Judge, text: str, truth: Any) -> Any:
    submit = getattr(judge, "submit", None)
    try:
        if callable(submit):
            return submit(text, truth)
        result = judge.score(text, truth)
        return lambda: result
    except Exception as exc:  # noqa: BLE001 - recorded, scores 0
        failure = JudgeResult(0.0, {"judge_error": f"{type(exc).__name__}: {exc}"})
        return lambda: failure


def _collect(pending: Any) -> JudgeResult:
    try:
        result = pending()
        if not isinstance(result, JudgeResult):
            return JudgeResult(0.0, {"judge_error": f"judge returned {type(result).__name__}, not a JudgeResult"})
        return result
    except Exception as exc:  # noqa: BLE001
        return JudgeResult(0.0, {"judge_error": f"{type(exc).__name__}: {exc}"})


def _zero_metrics(reason: str) -> dict[str, Any]:
    return {"grounding_score": 0.0, "worldmodeling_score": 0.0, "grounding_reward": 0.0,
            "worldmodeling_reward": 0.0, "state_reward": 0.0, "judge_errors": [],
            "state_reward_details": {"skipped": reason}}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)

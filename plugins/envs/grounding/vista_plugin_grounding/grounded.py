"""The shared base of this plugin's envs: ViGoRL's grounded-reasoning reward on top of the QA env.

``grounding_reward="single_turn"`` (SAT-2, V*, web grounding without tools): reward =
``correct_reward·acc + coordinate_reward·(format·coordinate)`` with the defaults 0.5 / 0.5, where
``coordinate`` is 1 when the ``<think>`` text cites at least one integer ``(x, y)``.  The format term
is implicit: an answer with a broken format never reaches judging (it is feedback, reward 0).

``grounding_reward="multi_turn"`` (zoom turns): reward = ``0.6·acc + 0.4·format`` with format =
``1 + 0.2·(unique tool-call coordinates − 1)``, unique when at least 10 px apart (so format can exceed
1).  As in ViGoRL's ``point_in_bbox_multicrop.py`` / ``string_match_multiturn.py``, only the zoom
calls' coordinates count, not points written in ``<think>``: otherwise a reply earns the bonus by
writing one place and zooming at another.  Tool turns the rollout engine runs arrive through
``observe_tool_turn``.  Only calls the env accepted count (no errored call, none past the image
budget), only points inside the shown image, and at most ``bonus_points`` of them (4, as the
``vigorl/multiturn`` judge): ViGoRL's turn limit bounds its bonus the same way, and without a bound
a policy learns to zoom everywhere for reward.

As in ViGoRL, intermediate points are never rewarded for being *right*; whether any lands on the
objects the question is about is reported as ``info["grounded"]`` (a metric only).

``grounding_reward`` was called ``reward_mode`` up to 0.1.0, which hid the answer-attempts
``reward_mode`` (``first``/``decayed``/``last``) of the QA env.  The value sets do not overlap, so
``reward_mode: single_turn|multi_turn`` still works (moved to ``grounding_reward`` with a warning) and
``reward_mode: first|decayed|last`` scores answer attempts on grounded envs as on every QA env.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, get_args

from pydantic import Field, model_validator
from vista_plugin_judges.boxes import point_in_box
from vista_plugin_judges.points import unique_points
from vista_plugin_vqa.base import QAEnvConfig, ToolQAEnv

from vista_plugin_grounding.coords import format_bonus, think_points
from vista_rl import ParsedResponse

GroundingReward = Literal["single_turn", "multi_turn"]
_WEIGHTS: dict[str, tuple[float, float]] = {"single_turn": (0.5, 0.5), "multi_turn": (0.6, 0.4)}


def moved_grounding_reward(data: Any) -> Any:
    """Old configs: ``reward_mode`` with a grounding value (``single_turn``/``multi_turn``) becomes
    ``grounding_reward``, with a ``FutureWarning`` (shown by default, as every renamed config key's in
    ``vista_rl.config.renamed_keys``).  Giving both is an error.  Other ``reward_mode`` values are the
    answer-attempts setting and stay."""
    if not isinstance(data, dict) or data.get("reward_mode") not in get_args(GroundingReward):
        return data
    data = dict(data)
    if "grounding_reward" in data:
        raise ValueError(f"reward_mode: {data['reward_mode']} is the old name of grounding_reward; give only "
                         "grounding_reward (reward_mode is the answer-attempts setting: first, decayed or last)")
    warnings.warn(f"config key reward_mode: {data['reward_mode']} is deprecated and goes away in vista-rl 0.2; "
                  f"use grounding_reward: {data['reward_mode']} (reward_mode now sets how answer attempts "
                  "score: first, decayed or last)", FutureWarning, stacklevel=2)
    data["grounding_reward"] = data.pop("reward_mode")
    return data


class GroundedConfig(QAEnvConfig):
    grounding_reward: GroundingReward = Field("single_turn", description="ViGoRL's single-turn or multi-turn "
                                              "grounded reward (was reward_mode)")
    correct_reward: float = Field(0.5, description="weight of answer accuracy (multi_turn default 0.6)")
    coordinate_reward: float = Field(0.5, ge=0.0, description="weight of the grounded-format term "
                                                                "(multi_turn default 0.4)")
    unique_distance: float = Field(10.0, gt=0, description="points closer than this count once (pixels)")
    bonus_points: int = Field(4, ge=1, le=16, description="multi_turn: unique zoom points the format bonus counts "
                              "at most (ViGoRL's turn limit bounds them; vigorl/multiturn's max_coordinates)")

    @model_validator(mode="before")
    @classmethod
    def _old_reward_mode(cls, data: Any) -> Any:
        return moved_grounding_reward(data)

    @model_validator(mode="after")
    def _mode_weights(self) -> GroundedConfig:
        acc, coord = _WEIGHTS[self.grounding_reward]
        if "correct_reward" not in self.model_fields_set:
            self.correct_reward = acc
        if "coordinate_reward" not in self.model_fields_set:
            self.coordinate_reward = coord
        return self


class GroundedQAEnv(ToolQAEnv):
    """Subclasses put ``target_boxes`` (shown-image pixels) into ``Problem.info`` for the metric."""

    config_class: type[QAEnvConfig] = GroundedConfig
    config: GroundedConfig

    def cited_points(self) -> list[tuple[float, float]]:
        """Points in every ``<think>`` so far, then every tool call's ``coordinate``."""
        thinks = [text for parsed in self.responses for text in parsed.fields.get("think", [])]
        return think_points(thinks) + self.call_coordinates()

    def extra_reward(self, parsed: ParsedResponse, final: bool) -> tuple[float, dict[str, Any]]:
        points = self.cited_points()
        if self.config.grounding_reward == "single_turn":  # ViGoRL: at least one point in <think>
            unique = unique_points(points, self.config.unique_distance)
            term = 1.0 if unique else 0.0
        else:  # ViGoRL multi-turn: the zoom calls' coordinates only
            unique = unique_points(self.call_coordinates(), self.config.unique_distance)
            term = format_bonus(len(unique), self.config.bonus_points)
        boxes = (self.problem.info.get("target_boxes") if self.problem else None) or []
        grounded = any(point_in_box(p, box) for p in points for box in boxes)
        return self.config.coordinate_reward * term, {
            "points_cited": len(points), "unique_points": len(unique), "grounded": grounded,
            "coordinate_term": term}

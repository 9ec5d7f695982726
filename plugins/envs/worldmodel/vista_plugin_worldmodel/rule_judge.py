"""Rule-based grounding and world-modeling judges: no model, the text is read into relations.

Grounding scores ``<observation>`` against the true state *before* the turn; world modeling scores
``<prediction>`` against the true state *after* it.  The arithmetic is the same (see
:mod:`vista_plugin_worldmodel.scoring`); the two judges differ in which tag and which ``info`` key
they belong to, which :class:`~vista_plugin_worldmodel.env.StateRewardEnv` reads from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from vista_plugin_worldmodel.relations import normalize_relations, parse_relations
from vista_plugin_worldmodel.scoring import match_score
from vista_rl import Judge, JudgeResult


class RelationRuleJudge(Judge):
    """Score a description (text or relation list) against a true relation list.

    ``partial_credit``: credit for a matched object with one of its two relations right (0 is VAGEN's
    exact rule); ``type_weights``: weight per object type (default: equal over the types present);
    ``synonyms``: object id -> words that name it in text (default: target/goal, box/crate, hole)."""

    name: ClassVar[str] = "worldmodel/relations"
    #: The response tag this judge scores and the ``info`` key holding its truth.
    tag: ClassVar[str] = "observation"
    truth_key: ClassVar[str] = "observation_state"

    def __init__(self, partial_credit: float = 0.0, type_weights: Mapping[str, float] | None = None,
                 synonyms: Mapping[str, Iterable[str]] | None = None) -> None:
        if not 0.0 <= partial_credit <= 1.0:
            raise ValueError(f"partial_credit must be in [0, 1], got {partial_credit}")
        self.partial_credit = partial_credit
        self.type_weights = dict(type_weights) if type_weights is not None else None
        self.synonyms = {key: tuple(words) for key, words in synonyms.items()} if synonyms is not None else None

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        truth = normalize_relations(reference)
        if truth is None:
            return JudgeResult(0.0, {"error": "reference is not a relation list (list of {object_id, "
                                              "vertical_relation, horizontal_relation})"})
        predicted = parse_relations(prediction, self.synonyms)
        match = match_score(predicted, truth, self.partial_credit, self.type_weights)
        details: dict[str, Any] = {"scorer": "rule", "parsed": predicted, **match.details()}
        if not predicted and truth:
            details["error"] = "no relation could be read from the text"
        return JudgeResult(match.score, details)


class GroundingRuleJudge(RelationRuleJudge):
    """``<observation>`` vs the state before the turn."""

    name = "worldmodel/grounding"
    tag = "observation"
    truth_key = "observation_state"


class WorldModelingRuleJudge(RelationRuleJudge):
    """``<prediction>`` vs the state after the turn."""

    name = "worldmodel/worldmodeling"
    tag = "prediction"
    truth_key = "prediction_state"

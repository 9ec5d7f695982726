"""The rule-based scorer on hand-written observations and predictions: right, partly right, malformed."""

from __future__ import annotations

import pytest
from vista_plugin_worldmodel.relations import describe_relations, parse_relations
from vista_plugin_worldmodel.rule_judge import GroundingRuleJudge, WorldModelingRuleJudge
from vista_plugin_worldmodel.scoring import match_score

import vista_rl
from vista_rl_sdk import check_judge


def rel(object_id: str, vertical: str, horizontal: str) -> dict[str, str]:
    return {"object_id": object_id, "vertical_relation": vertical, "horizontal_relation": horizontal}


# A Sokoban state: box to the left of the player in its row, target directly below.
SOKOBAN = [rel("box", "same", "left"), rel("target", "below", "same")]
# A FrozenLake state: goal below-right, two holes.
LAKE = [rel("target", "below", "right"), rel("hole", "same", "left"), rel("hole", "above", "right")]


@pytest.mark.parametrize(("text", "expected"), [
    # the envs' own wording
    ("The box is 1 column to the left of the player. The target is 1 row below the player.", 1.0),
    # other natural phrasings of the same state
    ("The box is directly to my left; the goal is right below me.", 1.0),
    ("I am to the right of the box, and the target is beneath me.", 1.0),
    ("The player is above the target. The crate is on the left in the same row.", 1.0),
    # VAGEN's structured format
    ('[{"object_id": "box", "vertical_relation": "same", "horizontal_relation": "left"}, '
     '{"object_id": "target", "vertical_relation": "below", "horizontal_relation": "same"}]', 1.0),
    # partly right: box right, target wrong -> F1_box 1, F1_target 0
    ("The box is to the left of the player. The target is above the player.", 0.5),
    # partly right: the target is missing -> F1_target 0
    ("The box is to the left of the player.", 0.5),
    # a hallucinated hole costs a third type with F1 0
    ("The box is to the left of the player. The target is below the player. A hole is above me.", 2 / 3),
    # all wrong
    ("The box is to the right of the player. The target is above the player.", 0.0),
    # malformed: no directions, no objects, nonsense
    ("I see a box and a target.", 0.0),
    ("", 0.0),
    ("<<<>>> {{[", 0.0),
])
def test_grounding_on_hand_written_observations(text: str, expected: float) -> None:
    result = GroundingRuleJudge().score(text, SOKOBAN)
    assert result.score == pytest.approx(expected), result.details


def test_partial_credit_counts_one_right_axis() -> None:
    text = "The box is to the left of the player. The target is below and to the right of the player."
    exact = GroundingRuleJudge().score(text, SOKOBAN)
    partial = GroundingRuleJudge(partial_credit=0.5).score(text, SOKOBAN)
    assert exact.score == pytest.approx(0.5)  # target: vertical right, horizontal wrong -> no match
    assert partial.score == pytest.approx(0.75)  # (1 + 0.5) / 2
    assert partial.details["partial_matches"] == 1 and partial.details["exact_matches"] == 1


def test_world_modeling_on_hand_written_predictions() -> None:
    after = [rel("target", "below", "right"), rel("hole", "same", "left"), rel("hole", "above", "right")]
    judge = WorldModelingRuleJudge()
    right = judge.score("The goal is 2 rows below and 1 column to the right of the player. One hole is to my "
                        "left. A hole is above and to the right of the player.", after)
    assert right.score == pytest.approx(1.0), right.details
    one_hole = judge.score("The goal is below and to the right of the player. A hole is to my left.", after)
    # target F1 1; holes: 1 of 2 found -> F1 2*1/(1+2) = 2/3
    assert one_hole.score == pytest.approx((1 + 2 / 3) / 2)
    two_holes = judge.score("The goal is below-right of me. Two holes are to the left of the player.", after)
    assert two_holes.details["parsed"].count(rel("hole", "same", "left")) == 2
    assert two_holes.score == pytest.approx((1 + 0.5) / 2)  # 1 of 2 predicted holes matches 1 of 2 true


def test_type_weights_follow_vagen_sokoban() -> None:
    text = "The box is to the left of the player. The target is above the player."
    judge = GroundingRuleJudge(type_weights={"box": 0.8, "target": 0.2})
    assert judge.score(text, SOKOBAN).score == pytest.approx(0.8)


def test_reference_may_be_json_text_and_bad_references_score_zero() -> None:
    import json

    judge = WorldModelingRuleJudge()
    assert judge.score("The box is left of me, the target below me.", json.dumps(SOKOBAN)).score == 1.0
    bad = judge.score("The box is left of me.", "not a state")
    assert bad.score == 0.0 and "reference" in bad.details["error"]


def test_parser_reads_structures_and_survives_hostile_text() -> None:
    assert parse_relations({"objects": SOKOBAN}) == SOKOBAN
    assert parse_relations('noise [{"object_id": "Box", "vertical_relation": "Up", "horizontal_relation": '
                           '"same column"}] noise') == [rel("box", "above", "same")]
    assert parse_relations("the box is left. " * 100_000)[:1] == [rel("box", "same", "left")]  # cut, not hung
    assert parse_relations(None) == [] and parse_relations(3.5) == []


def test_describe_relations_round_trips_through_the_parser() -> None:
    assert sorted(map(str, parse_relations(describe_relations(LAKE)))) == sorted(map(str, LAKE))


def test_match_score_edge_cases() -> None:
    assert match_score([], []).score == 1.0
    assert match_score([rel("box", "same", "left")], []).score == 0.0


@pytest.mark.parametrize("judge_id", ["worldmodel/grounding", "worldmodel/worldmodeling"])
def test_registered_rule_judges_pass_check_judge(judge_id: str) -> None:
    judge = vista_rl.make_judge(judge_id)
    check_judge(judge, SOKOBAN, wrong=["The box is to the right of the player.", "The target is above me.",
                                       "nothing to see"],
                correct="The box is to the left of the player. The target is below the player.")


def test_the_oracle_of_the_grid_games_scores_full_marks() -> None:
    """Sokoban's oracle writes true <observation>/<prediction> text: the rule judges must agree."""
    env = vista_rl.make_env("sokoban/sokoban-v0", render_mode="text")
    env.reset(seed=11)
    grounding, world = GroundingRuleJudge(), WorldModelingRuleJudge()
    for _ in range(3):
        response = env.oracle_response()
        if response is None:
            break
        result = env.step(response)
        parsed = result.info["parsed"]
        assert grounding.score(parsed["observation"], result.info["observation_state"]).score == 1.0
        assert world.score(parsed["prediction"], result.info["prediction_state"]).score == 1.0
        if result.done:
            break


def test_vista_judges_and_envs_list_the_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from vista_rl.cli import main

    for command, expected in (("judges", {"worldmodel/grounding", "worldmodel/worldmodeling",
                                          "worldmodel/grounding-llm", "worldmodel/worldmodeling-llm"}),
                              ("envs", {"worldmodel/state-reward-v0"})):
        try:
            main([command, "--json"])
        except SystemExit as exc:
            assert not exc.code
        listed = {item["id"]: item for item in json.loads(capsys.readouterr().out)}
        assert expected <= set(listed)
        assert {listed[item]["distribution"] for item in expected} == {"vista-plugin-worldmodel"}

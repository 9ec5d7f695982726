"""ViGoRL's rewards on hand-written responses, well-formed and malformed."""

from __future__ import annotations

import json

import pytest
from vista_plugin_vigorl.rewards import (
    GroundedMultiTurnJudge,
    GroundedSingleTurnJudge,
    check_multiturn_grammar,
    unique_points,
)

import vista_rl
from vista_rl_sdk import check_judge


def call(x: object, y: object) -> str:
    return ("<tool_call>\n" + json.dumps({"name": "search_coordinate", "arguments": {"coordinate": [x, y]}})
            + "\n</tool_call>")


OBS = "\n<|im_start|>user\n<observation>\nHere is the crop:\n<|vision_start|><|image_pad|><|vision_end|>\n</observation><|im_end|>\n<|im_start|>assistant\n"


def transcript(points: list[tuple[object, object]], answer: str = "left", end: str = "<|im_end|>") -> str:
    text = ""
    for x, y in points:
        text += f"<think> check ({x}, {y}) </think>\n{call(x, y)}{OBS}"
    return text + f"<think> so the answer </think>\n<answer> {answer} </answer>{end}"


# -- single turn ---------------------------------------------------------------------------------

SINGLE = GroundedSingleTurnJudge()


@pytest.mark.parametrize(("response", "score", "parts"), [
    ("<think> The mug (120, 40) is left of the lamp (300, 44). </think>\n<answer> left </answer>", 1.0, (1, 1, 1)),
    # option letter dropped, case ignored
    ("<think> mug at (120, 40) </think><answer> A. Left </answer>", 1.0, (1, 1, 1)),
    # right format and points, wrong answer: the format half only
    ("<think> mug at (120, 40) </think><answer> right </answer>", 0.5, (0, 1, 1)),
    # no integer point in the thought: coordinate 0 (a float point does not count)
    ("<think> the mug is on the left (1.5, 2.5) </think><answer> left </answer>", 0.5, (1, 1, 0)),
    # no <think>: format 0, accuracy still counts
    ("<answer> left </answer>", 0.5, (1, 0, 0)),
    # text after the answer breaks the full match
    ("<think> (1, 2) </think><answer> left </answer> because reasons", 0.5, (1, 0, 1)),
    # empty answer: format 0 and no accuracy
    ("<think> (1, 2) </think><answer>   </answer>", 0.0, (0, 0, 1)),
    # unclosed think
    ("<think> (1, 2) <answer> left </answer>", 0.5, (1, 0, 0)),
    ("", 0.0, (0, 0, 0)),
])
def test_single_turn_string_match(response: str, score: float, parts: tuple[int, int, int]) -> None:
    result = SINGLE.score(response, "left")
    assert result.score == pytest.approx(score)
    assert (result.details["acc"], result.details["format"], result.details["coordinate"]) == parts


def test_single_turn_handles_non_text_and_option_text_references() -> None:
    for garbage in (None, 3, {"a": 1}, ["<think>"], "x" * 300_000):
        assert SINGLE.score(garbage, "left").score == 0.0
    # the reference itself may carry the option letter
    assert SINGLE.score("<think> (1, 2) </think><answer> left </answer>", "B) left").details["acc"] == 1.0
    # a list of references matches any
    assert SINGLE.score("<think> (1, 2) </think><answer> up </answer>", ["down", "up"]).score == 1.0


def test_min_coordinates_counts_distinct_points() -> None:
    judge = GroundedSingleTurnJudge(min_coordinates=2)
    twice = "<think> (5, 5) then again (5, 5) </think><answer> left </answer>"
    assert judge.score(twice, "left").details["coordinate"] == 0.0
    assert judge.score(twice.replace("again (5, 5)", "(9, 5)"), "left").score == 1.0


def test_single_turn_point_in_box() -> None:
    judge = vista_rl.make_judge("vigorl/grounded-point-in-box")
    good = "<think> The search bar (210, 33) </think>\n<answer> (210, 33) </answer>"
    assert judge.score(good, [200, 20, 400, 50]).score == 1.0
    assert judge.score(good, "(300, 20, 400, 50)").score == 0.5  # outside: format half only
    assert judge.score("<think> (210, 33) </think><answer> the bar </answer>", [200, 20, 400, 50]).score == 0.5
    assert judge.score(good, [400, 40, 800, 100], scale=2.0).score == 1.0  # the model saw a half-size image
    with pytest.raises(ValueError, match="reference must be a box"):
        judge.score(good, "nowhere")


# -- multi turn ----------------------------------------------------------------------------------

MULTI = GroundedMultiTurnJudge()


def test_multiturn_score_and_unique_point_bonus() -> None:
    # one point: format 1.0 -> 0.6 + 0.4
    assert MULTI.score(transcript([(100, 100)]), "left").score == pytest.approx(1.0)
    # three unique points: format 1.4
    result = MULTI.score(transcript([(100, 100), (200, 100), (100, 300)]), "left")
    assert result.details["format"] == pytest.approx(1.4) and result.score == pytest.approx(0.6 + 0.4 * 1.4)
    # a point 9 px away is not unique; 10 px away is
    near = MULTI.score(transcript([(100, 100), (109, 100)]), "left").details
    far = MULTI.score(transcript([(100, 100), (106, 108)]), "left").details
    assert (near["unique_coordinates"], near["format"]) == (1, 1.0)
    assert (far["unique_coordinates"], far["format"]) == (2, pytest.approx(1.2))
    # no tool call at all is still well formed (format 1, no bonus)
    assert MULTI.score("<think> easy </think><answer> left </answer>", "left").score == pytest.approx(1.0)
    # wrong answer keeps the format part
    assert MULTI.score(transcript([(1, 1), (50, 50)], answer="right"), "left").score == pytest.approx(0.4 * 1.2)


def test_bonus_is_capped_so_max_score_holds() -> None:
    many = transcript([(i * 20, 0) for i in range(8)])
    result = MULTI.score(many, "left")
    assert result.details["unique_coordinates"] == 8
    assert result.score == pytest.approx(MULTI.max_score) == pytest.approx(0.6 + 0.4 * 1.6)


@pytest.mark.parametrize(("text", "error"), [
    ("<tool_call>{}</tool_call><answer> left </answer>", "<tool_call> where <think> was expected"),
    ("<think> a </think>" + call(1, 2) + "<think> b </think><answer> left </answer>",
     "<think> where <observation> was expected"),
    ("<think> a </think><observation> x </observation>", "<observation> where <tool_call> or <answer>"),
    ("<think> a </think>" + call(1.5, 2) + OBS + "<think> b </think><answer> left </answer>",
     "coordinate must be a list of two integers"),
    ("<think> a </think><tool_call>{not json}</tool_call>" + OBS + "<think> b </think><answer> left </answer>",
     "not JSON"),
    ("<think> a </think>" + call(True, 2) + OBS + "<think> b </think><answer> left </answer>", "two integers"),
    ("<think> a <think> b </think></think><answer> left </answer>", "is not closed"),
    ("<think> a </think><answer> left </answer><think> more </think>", "text after </answer>"),
    ("<think> a </think><answer> left </answer> trailing words", "text after </answer>"),
    ("<think> a </think>" + call(3, 4) + OBS, "does not end with <answer>"),
    ("</think><answer> left </answer>", "without an opening tag"),
    ("<think> a </think><answer>  </answer>", "the answer is empty"),
    ("just text", "does not end with <answer>"),
])
def test_multiturn_grammar_rejects_malformed(text: str, error: str) -> None:
    grammar = check_multiturn_grammar(text)
    assert not grammar.ok and error in grammar.error
    result = MULTI.score(text, "left")
    assert result.details["format"] == 0.0
    assert result.score == pytest.approx(0.6 * result.details["acc"])


def test_multiturn_accepts_turn_lists_and_point_in_box() -> None:
    turns = [f"<think> zoom </think>\n{call(40, 40)}", OBS, "<think> found </think>\n<answer> (45, 42) </answer>"]
    box = vista_rl.make_judge("vigorl/multiturn-point-in-box")
    assert box.score(turns, [30, 30, 60, 60]).score == pytest.approx(1.0)
    assert box.score(turns, [0, 0, 10, 10]).score == pytest.approx(0.4)
    for garbage in (None, 7, [1, 2], "x" * 300_000):
        assert MULTI.score(garbage, "left").score == 0.0


def test_unique_points_is_greedy_in_order() -> None:
    assert unique_points([(0, 0), (5, 0), (10, 0), (14, 0), (21, 0)]) == [(0, 0), (10, 0), (21, 0)]


@pytest.mark.parametrize("judge_id", ["vigorl/grounded-string-match", "vigorl/grounded-point-in-box",
                                      "vigorl/multiturn-string-match", "vigorl/multiturn-point-in-box"])
def test_registered_judges_pass_check_judge(judge_id: str) -> None:
    spec = vista_rl.host().spec("judges", judge_id)
    check_judge(vista_rl.make_judge(judge_id), **spec.metadata["check_args"]).raise_if_failed()


def test_judges_serve_as_verl_reward_functions() -> None:
    reward = pytest.importorskip("vista_plugin_verl.reward")
    response = "<think> The mug (120, 40) is left of the lamp (300, 44). </think>\n<answer> left </answer>"
    scored = reward.compute_score("sat2", response, "left", judge="vigorl/grounded-string-match",
                                  use_answer_tag=False)
    assert scored["score"] == 1.0 and scored["format"] == 1.0
    wrong = reward.compute_score("sat2", transcript([(1, 1), (40, 40)], "right"), "left",
                                 judge="vigorl/multiturn-string-match", use_answer_tag=False)
    assert wrong["score"] == pytest.approx(0.4 * 1.2) and wrong["unique_coordinates"] == 2


def test_tag_scans_give_what_the_old_patterns_gave() -> None:
    """The linear scans replaced backtracking patterns (issue 22: 100 KB of ``<answer>`` took 15 s);
    on tricky texts they must decide exactly as the patterns did."""
    import random
    import re

    from vista_plugin_vigorl.rewards import single_turn_format, tag_contents

    pieces = ["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "a", "(1, 2)", "<", ">", "/"]
    rng = random.Random(7)
    texts = ["", "<think>a</think><answer>b</answer>", "<think></think>\n<answer></answer>",
             "<think>x</think> y <answer>b</answer>", "<think></think><answer></answer>x", "<think></answer>",
             "<think>a</think><answer>b</answer></think><answer>c</answer>"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 14))) for _ in range(3000)]
    for text in texts:
        for tag in ("answer", "think"):
            assert tag_contents(text, tag) == re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL), repr(text)
        old_format = re.fullmatch(r"<think>.*?</think>\s*<answer>.*?</answer>", text, re.DOTALL)
        assert single_turn_format(text) == bool(old_format), repr(text)

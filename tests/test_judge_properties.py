"""Properties every registered judge must keep, whatever the input (issue 23).

A wrong reward trains the wrong thing silently, so these hold for every judge in the registry (core,
first-party plugins and any plugin that registers ``check_args``):

- the reference itself (or the right answer written as models write it) scores ``max_score``:
  single letters, articles, numbers with units, LaTeX, unicode;
- in multiple choice, any other option scores less than the maximum;
- every score is finite and in ``[0, max_score]``, and no judge raises on any prediction:
  arbitrary text (lone surrogates too), huge numbers, NaN, containers, bytes.

A new judge must be covered: either a case below or ``check_args`` in its registration.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vista_rl

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Model judges call a model backend (an HTTP server) per score; their plugin tests them over real
# HTTP.  Property runs here would test the network, not the rule.
MODEL_JUDGES = {"worldmodel/grounding-llm", "worldmodel/worldmodeling-llm"}

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)  # surrogates included
ODD_INPUTS = st.one_of(
    ANY_TEXT,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=20),
    st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=5)), max_size=6),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from(["9" * 5000, "1e400", "-1e400", "nan", "inf", "1" + "0" * 400 + "%", "\ud800",
                     "\\frac{1}{0}", "\\boxed{", "$" * 300, "(" * 500, "<answer>", "x" * 100_000,
                     "1/0", "0/0", "10**10**10", "click [99999999999999999999999]"]),
)

WORDS = st.sampled_from(["A", "a", "B", "E", "the", "The", "an", "Paris", "New York", "yes", "No", "12 kg",
                         "145°", "6cm", "café", "Ünïcode", "東京", "ß", "naïve", "O'Brien", "x-ray",
                         "(a)", "(b)", "I", "1,250", "3/4", "-2", "don't know", "red and blue"])


@dataclass
class Case:
    """How to build a judge and draw (reference, right answer, context) for it."""

    draw: Callable[[st.DrawFn], tuple[Any, Any, dict[str, Any]]]
    kwargs: dict[str, Any] = field(default_factory=dict)


def _exact(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    from vista_rl.judges import fold_answer

    reference = draw(st.one_of(WORDS, st.text(min_size=1, max_size=20).filter(lambda t: fold_answer(t) != "")))
    variant = draw(st.sampled_from([str.lower, str.upper, lambda t: f"  {t} ", lambda t: t]))
    return reference, variant(reference), {}


def _numeric(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    number = draw(st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 3))))
    reference = draw(st.sampled_from([f"{number}", f"{number} kg", f"{number}%", f"{abs(number):,}", f"${abs(number)}"]))
    return reference, reference, {}


def _text_or_number(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    reference = draw(st.one_of(WORDS, st.integers(-10**5, 10**5).map(str)))
    return reference, reference, {}


def _math(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    a, b = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    reference = draw(st.sampled_from([f"\\frac{{{a}}}{{{b}}}", f"{a}", f"-{a}", f"{a}.5", f"{a}\\sqrt{{{b}}}",
                                      f"{a}^{{2}}", "\\pi", f"x = {a}"]))
    return reference, reference, {}


def _choices(draw: st.DrawFn) -> list[str]:
    from vista_plugin_judges.choice import _literal

    option = st.one_of(WORDS, st.text(min_size=1, max_size=12).filter(lambda t: t.strip() != ""))
    options = draw(st.lists(option, min_size=2, max_size=6, unique_by=_literal))
    return options


def _multiple_choice(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    from vista_plugin_judges.choice import LETTERS

    choices = _choices(draw)
    target = draw(st.integers(0, len(choices) - 1))
    reference = draw(st.sampled_from(_references(choices, target)))
    right = draw(st.sampled_from([choices[target], LETTERS[target], f"({LETTERS[target]}) {choices[target]}"]
                                 if _letter_is_free(choices, target) else [choices[target]]))
    return reference, right, {"choices": choices}


def _references(choices: list[str], target: int) -> list[Any]:
    """The forms adapters store: the index, the letter, the option text (unless that text is a
    single letter, which a reference reads as a letter)."""
    from vista_plugin_judges.choice import LETTERS

    forms: list[Any] = [target, LETTERS[target]]
    if len(choices[target].strip()) != 1:
        forms.append(choices[target])
    return forms


def _letter_is_free(choices: list[str], index: int) -> bool:
    """Whether option ``index``'s letter is not itself written as some option's text (then "A"
    names that option, as it should)."""
    from vista_plugin_judges.choice import LETTERS, _literal

    literal_options = {_literal(option) for option in choices}
    letter = LETTERS[index]
    return not {letter, f"({letter})", letter.lower(), f"({letter.lower()})"} & literal_options


def _vqa(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    majority = draw(WORDS)
    others = draw(st.lists(WORDS, max_size=6))
    answers = [majority] * 4 + others  # leave-one-out: every subset of the others keeps three
    return answers, majority, {}


def _anls(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    reference = draw(st.one_of(WORDS, st.text(min_size=1, max_size=30).filter(lambda t: t.strip() != "")))
    return [reference], reference, {}


def _set(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    items = draw(st.lists(st.sampled_from(["Texas", "Ohio", "New York", "Maine", "Utah", "café"]),
                          min_size=1, max_size=4, unique=True))
    return ", ".join(items), list(reversed(items)), {}


def _box(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    x1, y1 = draw(st.integers(0, 2000)), draw(st.integers(0, 2000))
    return [x1, y1, x1 + draw(st.integers(1, 500)), y1 + draw(st.integers(1, 500))], []


def _iou(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    box, _ = _box(draw)
    return box, draw(st.sampled_from([box, str(box), "({}, {}, {}, {})".format(*box)])), {}


def _point(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    box, _ = _box(draw)
    x, y = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
    return box, draw(st.sampled_from([f"({x}, {y})", [x, y], f"[{x},{y}]"])), {}


def _click(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    target = draw(st.integers(0, 10**6))
    return target, f"click [{target}]", {}


def _relations(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    vertical = draw(st.sampled_from(["above", "below", "same"]))
    horizontal = draw(st.sampled_from(["left", "right", "same"]))
    truth = [{"object_id": "box", "vertical_relation": vertical, "horizontal_relation": horizontal}]
    return truth, truth, {}


def _format(draw: st.DrawFn) -> tuple[Any, Any, dict[str, Any]]:
    answer = draw(WORDS)
    return None, f"<think> because </think><answer> {answer} </answer>", {}


CASES: dict[str, Case] = {
    "exact": Case(_exact),
    "format": Case(_format),
    "relaxed_numeric": Case(_numeric),
    "multiple_choice": Case(_multiple_choice),
    "math": Case(_math),
    "vqa_accuracy": Case(_vqa),
    "anls": Case(_anls),
    "set_match": Case(_set),
    "iou": Case(_iou),
    "point_in_box": Case(_point),
    "grounding/click": Case(_click),
    "worldmodel/grounding": Case(_relations),
    "worldmodel/worldmodeling": Case(_relations),
}


def _registered() -> list[str]:
    return sorted(vista_rl.host().registry("judges").ids())


def _from_check_args(judge_id: str) -> Case | None:
    args = vista_rl.host().spec("judges", judge_id).metadata.get("check_args")
    if not args:
        return None
    reference, correct = args["reference"], args.get("correct", args["reference"])
    return Case(lambda draw: (reference, correct, dict(args.get("context") or {})))


def _case(judge_id: str) -> Case:
    case = CASES.get(judge_id) or _from_check_args(judge_id)
    assert case is not None, f"judge {judge_id!r} has no property case: add one here or check_args to its registration"
    return case


PROPERTY_JUDGES = [judge_id for judge_id in _registered() if judge_id not in MODEL_JUDGES]
TEXT_JUDGES = ["exact", "relaxed_numeric", "vqa_accuracy", "anls", "set_match"]


def _in_range(score: float, top: float) -> bool:
    return isinstance(score, (int, float)) and math.isfinite(score) and -1e-9 <= score <= top + 1e-9


def test_every_registered_judge_is_covered():
    assert set(MODEL_JUDGES) <= set(_registered()) or not MODEL_JUDGES & set(_registered())
    for judge_id in PROPERTY_JUDGES:
        _case(judge_id)


@pytest.mark.parametrize("judge_id", PROPERTY_JUDGES)
def test_the_reference_scores_the_maximum(judge_id):
    case = _case(judge_id)
    judge = vista_rl.make_judge(judge_id, **case.kwargs)
    top = judge.max_score

    @(FEW if judge_id == "math" else SETTINGS)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        reference, correct, context = data.draw(st.composite(lambda draw: case.draw(draw))())
        result = judge(correct, reference, **context)
        assert math.isclose(result.score, top), (judge_id, correct, reference, context, result)

    run()


@pytest.mark.parametrize("judge_id", PROPERTY_JUDGES)
def test_scores_stay_in_range_and_nothing_raises(judge_id):
    case = _case(judge_id)
    judge = vista_rl.make_judge(judge_id, **case.kwargs)
    top = judge.max_score

    @(FEW if judge_id == "math" else SETTINGS)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        reference, _, context = data.draw(st.composite(lambda draw: case.draw(draw))())
        prediction = data.draw(ODD_INPUTS)
        result = judge(prediction, reference, **context)
        assert _in_range(result.score, top), (judge_id, prediction, result)

    run()


@pytest.mark.parametrize("judge_id", TEXT_JUDGES)
@FEW
@given(reference=st.one_of(WORDS, ANY_TEXT), prediction=st.one_of(WORDS, ANY_TEXT))
def test_text_judges_take_any_reference_text(judge_id, reference, prediction):
    judge = vista_rl.make_judge(judge_id)
    assert _in_range(judge(prediction, reference).score, judge.max_score)


@SETTINGS
@given(st.data())
def test_no_other_option_scores_the_maximum(data):
    """Every other option, as its text, "(X) text", and as its letter where that letter is not itself
    an option's text (then "A" names that option), scores below the maximum."""
    from vista_plugin_judges.choice import LETTERS

    judge = vista_rl.make_judge("multiple_choice")
    choices = _choices(data.draw)
    target = data.draw(st.integers(0, len(choices) - 1))
    reference = data.draw(st.sampled_from(_references(choices, target)))
    assert judge(choices[target], reference, choices=choices).score == 1.0
    for other, option in enumerate(choices):
        if other == target:
            continue
        predictions = [option]
        letter = LETTERS[other]
        if _letter_is_free(choices, other):
            predictions += [letter, f"({letter}) {option}", f"The answer is {letter}."]
        for prediction in predictions:
            assert judge(prediction, reference, choices=choices).score < 1.0, (prediction, choices, target)


@pytest.mark.parametrize("letter", list(string.ascii_uppercase[:5]))
def test_right_letter_in_the_forms_models_write(letter):
    choices = ["(c)", "(a)", "(e)", "(d)", "(b)"]  # MathVista pid 168's options
    judge = vista_rl.make_judge("multiple_choice")
    index = string.ascii_uppercase.index(letter)
    for form in (letter, letter.lower(), f"({letter})", f"{letter}.", f"Answer: {letter}", f"The answer is {letter}."):
        assert judge(form, index, choices=choices).score == 1.0, form

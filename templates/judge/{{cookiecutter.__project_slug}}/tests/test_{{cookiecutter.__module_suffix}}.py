"""Behaviour of the example judge: tolerance, number formats, garbage.

These test the template's example judge: replace them with tests of yours when you replace the
example (they fail against anything else).  tests/test_*_conformance.py needs no change: it checks
whatever the plugin registers.
"""

from __future__ import annotations

import pytest
import vista_rl

JUDGE_ID = "{{ cookiecutter.plugin_name }}/{{ cookiecutter.__item_name }}"


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("42", "42", 1.0),
        ("41", "42", 1.0),          # within 5 %
        ("39", "42", 0.0),          # outside 5 %
        ("1,234.5 kg", 1234.5, 1.0),
        ("about 12%", "12", 1.0),
        ("0", "0", 1.0),
        ("0.1", "0", 0.0),
        ("-42", "42", 0.0),
        ("forty-two", "42", 0.0),
        (float("nan"), "42", 0.0),
        (None, "42", 0.0),
    ],
)
def test_scores(prediction: object, reference: object, expected: float) -> None:
    assert vista_rl.make_judge(JUDGE_ID).score(prediction, reference).score == expected


def test_tolerance_is_configurable() -> None:
    strict = vista_rl.make_judge(JUDGE_ID, relative_tolerance=0.0)
    assert strict.score("41", "42").score == 0.0
    assert strict.score("42.0", "42").score == 1.0


def test_details_explain_a_miss() -> None:
    result = vista_rl.make_judge(JUDGE_ID).score("no idea", "42")
    assert result.score == 0.0 and "no number" in result.details["error"]


def test_negative_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        vista_rl.make_judge(JUDGE_ID, relative_tolerance=-1)

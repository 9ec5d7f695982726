import pytest
from vista_plugin_judges.numeric import parse_number

import vista_rl
from vista_rl_sdk import check_judge

# (prediction, reference, expected score) -- ChartQA edge cases included
RELAXED_CASES = [
    ("12", "12", 1.0),
    ("12.5", "12", 1.0),             # 4.2% off
    ("12.6", "12", 1.0),             # 5.0% off: inside the 5% rule
    ("12.61", "12", 0.0),            # 5.08% off
    ("11.4", "12", 1.0),
    ("1,234", "1234", 1.0),          # thousands separator
    ("1234", "1,200", 1.0),          # 2.8% off
    ("45%", "45", 1.0),              # percent sign
    ("45 %", "45%", 1.0),
    ("$1,200", "1200", 1.0),         # currency
    ("12 kg", "12", 1.0),            # unit
    ("12 million", "12", 1.0),
    ("−3.2", "-3.2", 1.0),           # unicode minus
    ("3.2", "-3.2", 0.0),            # sign matters
    ("2019", "2019", 1.0),           # years are exact...
    ("2018", "2019", 0.0),           # ...although 2018 is within 5% of 2019
    ("2019.0", "2019", 1.0),
    ("0", "0", 1.0),                 # zero reference: exact
    ("0.01", "0", 0.0),
    ("10", "1", 0.0),                # no substring containment
    ("1", "10", 0.0),
    ("Yes", "yes", 1.0),             # text answers: normalised exact match
    ("the United States", "United States", 1.0),
    ("Canada", "United States", 0.0),
    ("12 and 14", "12", 0.0),        # two numbers are not one number
    ("about 40", "40", 1.0),
    ("0.45", "45%", 0.0),            # fraction vs percent: off by default
]


@pytest.mark.parametrize(("prediction", "reference", "expected"), RELAXED_CASES)
def test_relaxed_numeric_table(prediction, reference, expected):
    judge = vista_rl.make_judge("relaxed_numeric")
    assert judge(prediction, reference).score == expected, (prediction, reference)


def test_relaxed_numeric_options():
    assert vista_rl.make_judge("relaxed_numeric", tolerance=0.10)("13.1", "12").score == 1.0
    assert vista_rl.make_judge("relaxed_numeric", exact_years=False)("2018", "2019").score == 1.0
    assert vista_rl.make_judge("relaxed_numeric", percent_as_fraction=True)("0.45", "45%").score == 1.0
    assert vista_rl.make_judge("relaxed_numeric", absolute_tolerance=0.1)("0.05", "0").score == 1.0
    # list references (ChartQA parquet labels are lists)
    assert vista_rl.make_judge("relaxed_numeric")("7", ["6", "7"]).score == 1.0
    with pytest.raises(ValueError):
        vista_rl.make_judge("relaxed_numeric", tolerance=-1)


def test_parse_number_details():
    parsed = parse_number("$1,234.50")
    assert parsed is not None and parsed.value == 1234.5
    assert parse_number("45%").percent
    assert parse_number("seven") is None
    assert parse_number("x" * 10_000) is None


CHOICES = ["cat", "dog", "a red bird", "Paris"]
MC_CASES = [
    ("B", "B", 1.0), ("(b)", "B", 1.0), ("B. dog", "B", 1.0), ("dog", "B", 1.0),
    ("Answer: B", 1, 1.0), ("The answer is (B).", "dog", 1.0), ("It is a dog.", "B", 1.0),
    ("A", "B", 0.0), ("cat", "B", 0.0), ("cat or dog", "B", 0.0), ("E", "B", 0.0), ("", "B", 0.0),
    ("red bird", "C", 1.0), ("D", "Paris", 1.0),
]


@pytest.mark.parametrize(("prediction", "reference", "expected"), MC_CASES)
def test_multiple_choice_table(prediction, reference, expected):
    judge = vista_rl.make_judge("multiple_choice")
    assert judge(prediction, reference, choices=CHOICES).score == expected, prediction


MATH_CASES = [
    ("\\frac{1}{2}", "0.5", 1.0), ("1/2", "\\frac{1}{2}", 1.0), ("x = 3", "3", 1.0),
    ("The answer is \\boxed{12}", "12", 1.0), ("2\\sqrt{3}", "\\sqrt{12}", 1.0),
    ("13", "12", 0.0), ("no idea", "12", 0.0), ("\\frac{1}{3}", "0.5", 0.0),
]


@pytest.mark.parametrize(("prediction", "reference", "expected"), MATH_CASES)
def test_math_table(prediction, reference, expected):
    assert vista_rl.make_judge("math")(prediction, reference).score == expected, prediction


def test_math_judge_works_off_the_main_thread():
    from concurrent.futures import ThreadPoolExecutor

    judge = vista_rl.make_judge("math")
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(judge, "\\frac{2}{4}", "0.5").result().score == 1.0


VIZWIZ_ANSWERS = ["soy milk"] * 7 + ["milk", "milk", "unanswerable"]


@pytest.mark.parametrize(("prediction", "answers", "expected"), [
    ("Soy milk.", VIZWIZ_ANSWERS, 1.0),               # 7 of 10: every 9-subset has >= 3
    ("milk", VIZWIZ_ANSWERS, 0.6),                    # 2 of 10: (8 * 2/3 + 2 * 1/3) / 10
    ("unanswerable", VIZWIZ_ANSWERS, 0.3),            # 1 of 10: (9 * 1/3 + 0) / 10
    ("water", VIZWIZ_ANSWERS, 0.0),
    ("two", ["2"] * 3 + ["3"] * 7, 0.9),              # number words are digits; 3 of 10
    ("the dog", ["dog"] * 10, 1.0),                   # articles dropped
    ("dont know", ["don't know"] * 10, 1.0),          # contractions restored
    ("1,000", ["1000"] * 10, 1.0),                    # a comma inside a number goes
    ("3.5", ["35"] * 10, 0.0),                        # a decimal point stays
    ("yes.", ["yes"] * 10, 1.0),
])
def test_vqa_accuracy_table(prediction, answers, expected):
    assert vista_rl.make_judge("vqa_accuracy")(prediction, answers).score == pytest.approx(expected)


def test_vqa_accuracy_plain_formula_and_single_reference():
    plain = vista_rl.make_judge("vqa_accuracy", leave_one_out=False)
    assert plain("milk", VIZWIZ_ANSWERS).score == pytest.approx(2 / 3)
    assert plain("soy milk", VIZWIZ_ANSWERS).score == 1.0
    assert vista_rl.make_judge("vqa_accuracy")("Red", "red").score == 1.0  # one answer counts as agreed


@pytest.mark.parametrize(("prediction", "answers", "expected"), [
    ("0.28", ["0.28"], 1.0),
    ("0.23", ["0.28"], 0.75),                          # one edit in four characters
    ("ITC Limited", ["itc limited", "ITC"], 1.0),      # case-insensitive, best answer counts
    ("itc  limited ", ["itc limited"], 1.0),
    ("abcd", ["wxyz"], 0.0),                          # distance >= 0.5: no credit
    ("x" * 5000, ["0.28"], 0.0),                       # the length gap alone rules it out
])
def test_anls_table(prediction, answers, expected):
    assert vista_rl.make_judge("anls")(prediction, answers).score == pytest.approx(expected)


def test_set_match_ignores_order_and_separators():
    judge = vista_rl.make_judge("set_match")
    assert judge("Ohio, Texas", "Texas, Ohio").score == 1.0
    assert judge("Texas and the Ohio.", ["texas", "ohio"]).score == 1.0
    assert judge(["Ohio", "Texas"], "Texas, Ohio").score == 1.0
    result = judge("Ohio, Utah", "Texas, Ohio")
    assert result.score == 0.0 and result.details == {"missing": ["texas"], "extra": ["utah"]}


def test_iou_and_point_in_box():
    iou = vista_rl.make_judge("iou")
    assert iou([0, 0, 10, 10], [0, 0, 10, 10]).score == 1.0
    assert iou("(0, 0, 10, 10)", [0, 0, 10, 20]).score == 1.0          # IoU 0.5
    assert iou([0, 0, 10, 10], [5, 5, 15, 15]).score == 0.0            # IoU 1/7
    continuous = vista_rl.make_judge("iou", mode="continuous")
    assert continuous([0, 0, 10, 10], [5, 5, 15, 15]).score == pytest.approx(25 / 175)
    pib = vista_rl.make_judge("point_in_box")
    assert pib("(5, 5)", [0, 0, 10, 10]).score == 1.0
    assert pib([11, 5], [0, 0, 10, 10]).score == 0.0
    assert vista_rl.make_judge("point_in_box", margin=2)([11, 5], [0, 0, 10, 10]).score == 1.0
    assert pib([3, 3], [0, 0, 10, 10], scale=3.0).score == 1.0 and pib([4, 4], [0, 0, 10, 10], scale=3.0).score == 0.0


@pytest.mark.parametrize(("judge_id", "reference", "wrong", "context"), [
    ("relaxed_numeric", "42.5", ["50", "2019", "forty", "4"], {}),
    ("relaxed_numeric", "2019", ["2018", "2020"], {}),
    ("multiple_choice", "C", ["A", "B", "D", "dog"], {"choices": CHOICES}),
    ("math", "\\frac{3}{4}", ["0.7", "3/5"], {}),
    ("iou", [10, 10, 50, 50], [[60, 60, 90, 90], "(0, 0, 5, 5)"], {}),
    ("point_in_box", [10, 10, 50, 50], [[60, 60], "(0, 0)"], {}),
    ("vqa_accuracy", VIZWIZ_ANSWERS, ["red", "blue", "unanswerable", "a b c"], {}),
    ("anls", ["0.28", "28%"], ["1.00", "seventy", "0.2"], {}),
    ("set_match", "Texas, Ohio", ["Texas", "Texas, Ohio, Utah", "Ohio; Maine"], {}),
])
def test_conformance(judge_id, reference, wrong, context):
    correct = {"iou": [10, 10, 50, 50], "point_in_box": "(20, 30)", "vqa_accuracy": "Soy milk",
               "anls": "0.28", "set_match": "ohio and Texas"}.get(judge_id)
    check_judge(vista_rl.make_judge(judge_id), reference, wrong, correct=correct, context=context)


def test_items_come_from_this_distribution():
    for judge_id in ("relaxed_numeric", "multiple_choice", "math", "iou", "point_in_box", "vqa_accuracy", "anls", "set_match"):
        assert vista_rl.host().spec("judges", judge_id).distribution == "vista-plugin-judges"


# MathVista testmini (lupantech/MathVista data/testmini.json @ a2206f4): options written as labels
MATHVISTA_168 = ["(c)", "(a)", "(e)", "(d)", "(b)"]  # answer "(b)": letter E
MATHVISTA_849 = ["(c)", "(d)", "(a)", "(b)", "(e)"]  # answer "(b)": letter D


@pytest.mark.parametrize(("choices", "answer", "prediction", "expected"), [
    (MATHVISTA_168, "(b)", "E", 1.0), (MATHVISTA_168, "(b)", "(E)", 1.0), (MATHVISTA_168, "(b)", "(b)", 1.0),
    (MATHVISTA_168, "(b)", "The answer is E.", 1.0), (MATHVISTA_168, "(b)", "E. (b)", 1.0),
    (MATHVISTA_168, "(b)", "B", 0.0), (MATHVISTA_168, "(b)", "(e)", 0.0), (MATHVISTA_168, "(b)", "C", 0.0),
    (MATHVISTA_849, "(b)", "D", 1.0), (MATHVISTA_849, "(b)", "(b)", 1.0),
    (MATHVISTA_849, "(b)", "B", 0.0), (MATHVISTA_849, "(b)", "(d)", 0.0), (MATHVISTA_849, "(b)", "E", 0.0),
])
def test_multiple_choice_options_written_as_labels(choices, answer, prediction, expected):
    judge = vista_rl.make_judge("multiple_choice")
    letter = "ABCDE"[choices.index(answer)]
    for reference in (answer, letter, choices.index(answer)):  # text, the adapter's letter, index
        assert judge(prediction, reference, choices=choices).score == expected, (prediction, reference)


def test_exact_matches_article_only_answers():
    exact = vista_rl.make_judge("exact")
    check_judge(exact, "A", wrong=["B", "the", "an", ""])
    check_judge(exact, "the", wrong=["a", "A", "an"])
    assert exact("(a)", "A").score == 1.0 and exact("The Paris", "paris").score == 1.0


def test_math_verify_timeout_warning_is_quiet_but_other_records_pass():
    import logging
    from concurrent.futures import ThreadPoolExecutor

    import math_verify.grader
    import math_verify.parser

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    loggers = [logging.getLogger("math_verify.parser"), logging.getLogger("math_verify.grader")]
    for logger in loggers:
        logger.addHandler(handler)
    math_verify.parser.TIMEOUT_WARNING_SHOWN = math_verify.grader.TIMEOUT_WARNING_SHOWN = False
    try:
        judge = vista_rl.make_judge("math")
        with ThreadPoolExecutor(1) as pool:  # off the main thread: no timeout, so math-verify warns
            assert pool.submit(judge, "\\frac{2}{4}", "0.5").result().score == 1.0
        assert math_verify.parser.TIMEOUT_WARNING_SHOWN  # the warning was raised, and filtered
        assert not [r for r in records if "Timeout is disabled" in r.getMessage()]
        loggers[0].error("a real math-verify error")
        assert [r.getMessage() for r in records] == ["a real math-verify error"]
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def test_math_records_errors_instead_of_swallowing_them(monkeypatch):
    import math_verify

    judge = vista_rl.make_judge("math")
    real_verify = math_verify.verify

    def broken_verify(*args, **kwargs):  # a stand-in for a math-verify bug on one reference
        raise RuntimeError("sympy exploded")

    monkeypatch.setattr(math_verify, "verify", broken_verify)
    result = judge("3", ["3"])
    assert result.score == 0.0 and "RuntimeError: sympy exploded" in result.details["errors"][0]
    monkeypatch.setattr(math_verify, "verify", real_verify)
    assert judge("3", ["3"]).score == 1.0


def test_numeric_judges_survive_huge_numbers():
    for judge_id in ("relaxed_numeric", "point_in_box", "iou"):
        judge = vista_rl.make_judge(judge_id)
        reference = "12" if judge_id == "relaxed_numeric" else [0, 0, 10, 10]
        for prediction in (10**400, "9" * 500, [10**400, 1], "1e400"):
            assert judge(prediction, reference).score == 0.0


# Geometry3K problem 15 (fixtures/real/geometry3k/train/15): 5 sqrt 3 = 8.660..., 5 sqrt 2 = 7.071...
GEOMETRY3K_15 = ["5", "5 \\sqrt { 2 }", "5 \\sqrt { 3 }", "10"]


@pytest.mark.parametrize(("prediction", "expected"), [
    ("8.66", 1.0), ("8.7", 1.0), ("8.660254", 1.0), ("5 \\sqrt { 3 }", 1.0), ("C", 1.0),
    ("9", 0.0),        # a whole number is not 8.66 (only the plain options "5" and "10" match numbers)
    ("8.6", 0.0),      # 8.66 rounds to 8.7, not 8.6
    ("8.67", 0.0),     # written to two decimals, 8.66 is the value
    ("7.07", 0.0),     # the value of option B
])
def test_multiple_choice_reads_a_decimal_against_symbolic_options(prediction, expected):
    assert vista_rl.make_judge("multiple_choice")(prediction, "C", choices=GEOMETRY3K_15).score == expected


def test_multiple_choice_symbolic_values_need_one_option():
    """Two options that round to the same value pick neither; plain-number options need the number."""
    same = ["\\sqrt { 2 }", "\\frac { 99 } { 70 }", "3"]  # 1.41421... and 1.41428...
    judge = vista_rl.make_judge("multiple_choice")
    assert judge("1.41", "A", choices=same).score == 0.0
    assert judge("1.414", "A", choices=same).score == 0.0
    assert judge("1.4142", "A", choices=same).score == 1.0
    assert judge("1.4143", "B", choices=same).score == 1.0
    assert judge("20.3", "A", choices=["20.25", "21", "27", "36"]).score == 0.0  # MathVista pid 410


@pytest.mark.parametrize(("judge_id", "prediction", "reference", "context"), [
    ("multiple_choice", "<think>A looks close, but it is B</think>B", "B", {"choices": ["cat", "dog"]}),
    ("multiple_choice", "<THINK>\nweighing cat and dog\n</THINK> dog", "B", {"choices": ["cat", "dog"]}),
    ("math", "<think>2 + 2 = 4, not 5</think>4", "4", {}),
    ("relaxed_numeric", "<think>the bar reads 12</think>12.2", "12", {}),
    ("exact", "<think>maybe a cat</think>dog", "dog", {}),
])
def test_a_closed_think_part_in_front_is_not_the_answer(judge_id, prediction, reference, context):
    judge = vista_rl.make_judge(judge_id)
    assert judge(prediction, reference, **context).score == 1.0
    unclosed = prediction.replace("</think>", "").replace("</THINK>", "")
    assert judge(unclosed, reference, **context).score == 0.0, "an unclosed <think> is not an answer"


def test_strip_reasoning_keeps_what_is_not_a_closed_block():
    assert vista_rl.strip_reasoning("<think>a</think> B <think>b</think>") == "B"
    assert vista_rl.strip_reasoning("<think>unclosed B") == "<think>unclosed B"
    assert vista_rl.strip_reasoning(3) == 3

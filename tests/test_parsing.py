"""Response parsers on a table of well-formed and malformed outputs: never an exception, always a
clear message."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vista_rl.observation import Observation
from vista_rl.parsing import ResponseFormat, parse_response, split_actions

THINK_ANSWER = ResponseFormat(required=("think", "answer"))
STRICT = ResponseFormat(required=("think", "answer"), strict=True)
TOOLS = ResponseFormat(required=("answer",), answer_or_tool_call=True)


def test_well_formed():
    parsed = parse_response("<think>go left</think><answer>Left</answer>", STRICT)
    assert parsed.format_ok and parsed.think == "go left" and parsed.answer == "Left" and parsed.errors == []


def test_vagen_grounding_worldmodeling_nesting():
    text = ("<think><observation>box at (1,2)</observation><reasoning>push</reasoning>"
            "<prediction>box on target</prediction></think><answer>Up</answer>")
    parsed = parse_response(text, ResponseFormat(required=("observation", "reasoning", "prediction", "answer"),
                                                 strict=True))
    assert parsed.format_ok, parsed.errors
    assert parsed.observation == "box at (1,2)" and parsed.prediction == "box on target"


@pytest.mark.parametrize(
    ("text", "fmt", "ok", "message"),
    [
        ("", THINK_ANSWER, False, "empty"),
        ("   \n", THINK_ANSWER, False, "empty"),
        ("<think>a</think><answer>b", THINK_ANSWER, True, "never closed"),
        ("<think>a</think><answer>b", STRICT, False, "<answer> is never closed"),
        ("<think>a<answer>b</think>", STRICT, False, "<answer> is not closed before </think>"),
        ("<think><think>a</think></think><answer>x</answer>", STRICT, False, "opened again"),
        ("</answer>oops<think>a</think><answer>b</answer>", STRICT, False, "never opened"),
        ("<think>a</think>", THINK_ANSWER, False, "missing <answer>"),
        ("<think>a</think><answer>   </answer>", THINK_ANSWER, False, "<answer> is empty"),
        ("<think>a</think><answer>b</answer> trailing words", STRICT, False, "outside the tags"),
        ("<think>a</think><answer>b</answer> trailing words", THINK_ANSWER, True, ""),
        ("<think>a</think><answer>1</answer><answer>2</answer>", STRICT, False, "appears 2 times"),
        ("<THINK>a</THINK><Answer>b</Answer>", THINK_ANSWER, True, ""),
        ("<think>日本語 🤖</think><answer>ÜBER ✓</answer>", STRICT, True, ""),
        ("<tool_call>{\"name\": \"crop\", </tool_call>", TOOLS, False, "not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", TOOLS, False, "JSON object"),
        ("<tool_call>{\"arguments\": {}}</tool_call>", TOOLS, False, "string \"name\""),
        ("<tool_call>{\"name\": \"crop\", \"arguments\": 5}</tool_call>", TOOLS, False, "must be a JSON object"),
        ("<tool_call>{\"name\": \"crop\", \"arguments\": {\"x\": 1}}</tool_call>", TOOLS, True, ""),
        ("<tool_call>{\"name\": \"crop\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>", TOOLS, True, ""),
        ("just words, no tags at all", THINK_ANSWER, False, "missing <think>"),
        ("<answer>" * 1000, THINK_ANSWER, False, "opened again"),
        ("<think>a</think><answer>B<answer>A</answer>B</answer>", THINK_ANSWER, False, "holds another <answer>"),
        ("<think><think>a</think></think><answer>x</answer>", THINK_ANSWER, True, "opened again"),
        # Python's own limits inside json: a >4,300-digit integer and nesting past the recursion limit
        ("<tool_call>" + "1" * 5000 + "</tool_call>", TOOLS, False, "not valid JSON (ValueError"),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", TOOLS, False, "not valid JSON (RecursionError"),
        ('<tool_call>{"name": "crop", "arguments": ' + "9" * 5000 + "}</tool_call>", TOOLS, False, "not valid JSON"),
        ('<tool_call>{"name": "crop", "arguments": "' + "1" * 5000 + '"}</tool_call>', TOOLS, False,
         "string that is not JSON"),
        ('<tool_call>{"name": "crop", "arguments": "' + "[" * 100_000 + '"}</tool_call>', TOOLS, False,
         "string that is not JSON"),
        ("[" * 100_000, TOOLS, False, "missing <answer>"),
        ("\ud800<answer>\udfff</answer>", TOOLS, True, ""),
    ],
)
def test_malformed_table(text, fmt, ok, message):
    parsed = parse_response(text, fmt)
    assert parsed.format_ok is ok, parsed.errors
    if message:
        assert any(message in error for error in parsed.errors), parsed.errors
    if not ok:
        assert parsed.feedback.startswith("Invalid response format")


def test_tool_call_arguments_parsed():
    parsed = parse_response('<think>zoom</think><tool_call>{"name": "crop_zoom", "arguments": {"x": 3, "y": 4}}'
                            "</tool_call>", TOOLS)
    assert parsed.format_ok
    assert parsed.tool_calls[0].name == "crop_zoom" and parsed.tool_calls[0].arguments == {"x": 3, "y": 4}


def test_one_megabyte_is_fast_and_safe():
    text = "<think>" + ("lorem ipsum <b> " * 70_000) + "</think><answer>Up"
    assert len(text) > 1_000_000
    start = time.perf_counter()
    parsed = parse_response(text, THINK_ANSWER)
    assert time.perf_counter() - start < 2.0  # a linear scan; a backtracking regex would take minutes
    assert parsed.answer == "Up" and parsed.format_ok


def test_deeply_nested_json_in_tool_call_does_not_raise():
    parsed = parse_response("<tool_call>" + "[" * 100_000 + "</tool_call>", TOOLS)
    assert not parsed.format_ok and parsed.tool_calls[0].error


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize("value", [None, 42, b"bytes", ["list"], pytest.param(10 ** 5000, id="huge-int"),
                                   pytest.param(_Unprintable(), id="unprintable")])
def test_non_string_input(value):
    parsed = parse_response(value, THINK_ANSWER)
    assert not parsed.format_ok


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_text_parses(text):
    for fmt in (THINK_ANSWER, STRICT, TOOLS):
        parsed = parse_response(text, fmt)
        assert isinstance(parsed.format_ok, bool)
        assert parsed.format_ok or parsed.errors


@given(st.lists(st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>",
                                 "x", "{", "}", " "]), max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_tag_soup_parses(pieces):
    parse_response("".join(pieces), STRICT)


@given(st.lists(st.sampled_from(["<tool_call>", "</tool_call>", '{"name": "t", "arguments": ', "}", "[", "]",
                                 "1" * 4400, '"', "\\", ", ", "\ud800"]), max_size=30))
@settings(max_examples=200, deadline=None)
def test_any_tool_call_soup_parses(pieces):
    """Huge numbers, brackets and lone surrogates inside tool calls: a result, never an exception."""
    parsed = parse_response("".join(pieces), TOOLS)
    assert parsed.format_ok or parsed.errors


def test_split_actions():
    assert split_actions("Up, Left,,Down ", ",", max_actions=2) == ["Up", "Left"]
    assert split_actions(None) == []
    assert split_actions("Up|Down", "|") == ["Up", "Down"]


@pytest.mark.parametrize("text", [
    "<tool_call><think><image><observation>",  # the fuzz's find: oddshape and count-objects raised on it
    '<tool_call>{"name": <image>}</tool_call>',
])
def test_quoted_model_text_in_messages_never_claims_an_image(text):
    parsed = parse_response(text)
    assert parsed.errors and "<image>" not in " ".join(parsed.errors)
    Observation(parsed.feedback)  # an env may put the feedback in an observation without images


# ------------------------------------------ linear-time extraction (issue 22, item 7): same results
_OLD_SVG_BLOCK = r"<svg\b(?:[^>]*/>|.*</svg\s*>)"
_OLD_URL = r"url\(\s*(['\"]?)(.*?)\1\s*\)"
_SVG_PIECES = ["<svg", "<SVG", "</svg>", "</svg >", "</svg", "/>", ">", "/", " ", "x", "\n", "<svgx", "<"]
_URL_PIECES = ["url(", "URL(", "'", '"', ")", " ", "#a", "x", "\t", "(", "url"]


def _random_texts(pieces: list[str], count: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))) for _ in range(count)]


def test_svg_extraction_gives_what_the_old_pattern_gave():
    """The linear scan replaced a backtracking pattern; on tricky inputs it must find the same block."""
    import re

    from vista_plugin_svg.safety import extract_svg

    old = re.compile(_OLD_SVG_BLOCK, re.IGNORECASE | re.DOTALL)
    cases = [
        "", "no svg here", "<svg/>", "<svg />", '<svg width="1"/><svg>x</svg>', "<svg>a</svg> b </svg >",
        "```xml\n<svg xmlns='http://www.w3.org/2000/svg'><rect/></svg>\n```", "<svg>unclosed", "<svgfoo/>",
        "<svg a='/'>x</svg>", "<svg " * 50, "<svg>" * 3 + "</svg>", "<SVG></Svg>", "<svg\n/>", "x<svg></svg\t\n>y",
        *_random_texts(_SVG_PIECES, 3000, seed=1),
    ]
    for text in cases:
        match = old.search(text)
        assert extract_svg(text) == (match.group(0) if match else None), repr(text)


def test_url_targets_give_what_the_old_pattern_gave():
    import re

    from vista_plugin_svg.safety import url_targets

    old = re.compile(_OLD_URL, re.IGNORECASE | re.DOTALL)
    cases = ["url(#a)", "url( '#a' )", 'url("x")', "url('#a)", "url(#a) url(http://x)", "url(", "url('x' ) )",
             "fill:url( #g );stroke:url('#h')", *_random_texts(_URL_PIECES, 3000, seed=2)]
    for text in cases:
        assert url_targets(text) == [match.group(2) for match in old.finditer(text)], repr(text)


def test_response_parsing_is_unchanged_on_adversarial_nesting():
    parsed = parse_response("<think>" * 1000 + "x" + "</answer>" * 1000)
    assert parsed.fields["think"] == ["<think>" * 999 + "x" + "</answer>" * 1000]  # unclosed: runs to the end
    assert parsed.errors[0] == "missing <answer>...</answer>"
    assert "<think> is opened again inside <think>" in parsed.errors

"""Parsers of model output on adversarial input: time at 10 KB and at 1 MB, and their ratio.

Linear time means the 1 MB input costs about 100 times the 10 KB one; a backtracking pattern costs
about 10,000 times (issue 22: ``extract_svg("<svg " * 20000)`` took 8 s).  Each parser gets inputs
built to hurt a naive regex: openings that never close, repeated prefixes, deep JSON nesting.

The anchors are the patterns ``extract_svg`` and ViGoRL's rewards used before (e.g.
``<svg\\b(?:[^>]*/>|.*</svg\\s*>)``), timed at 10 KB and 40 KB only (1 MB would take minutes) and
reported under ``elsewhere``.

    python benchmarks/parsing_adversarial.py            # JSON on stdout
"""

from __future__ import annotations

import json
import platform
import re
import time
from collections.abc import Callable
from typing import Any

from vista_plugin_svg.safety import extract_svg, url_targets
from vista_plugin_vigorl.rewards import single_turn_format, tag_contents

from vista_rl.parsing import parse_response

SMALL, LARGE = 10_000, 1_000_000


def _fill(unit: str, size: int, prefix: str = "", suffix: str = "") -> str:
    body = unit * max(1, (size - len(prefix) - len(suffix)) // len(unit))
    return prefix + body + suffix


CASES: dict[str, tuple[Callable[[str], Any], Callable[[int], str]]] = {
    "extract_svg: '<svg ' repeated": (extract_svg, lambda n: _fill("<svg ", n)),
    "extract_svg: '<svg>' repeated, never closed": (extract_svg, lambda n: _fill("<svg>", n)),
    "extract_svg: '</svg' + spaces repeated": (extract_svg, lambda n: _fill("<svg </svg  ", n)),
    "url_targets: 'url(' repeated": (url_targets, lambda n: _fill("url(", n)),
    "url_targets: \"url('\" repeated": (url_targets, lambda n: _fill("url('", n)),
    "url_targets: url( then spaces": (url_targets, lambda n: _fill(" ", n, "url(url(", ")")),
    "parse_response: '<think>' repeated": (parse_response, lambda n: _fill("<think>", n)),
    "parse_response: '</answer>' repeated": (parse_response, lambda n: _fill("</answer>", n)),
    "parse_response: '<answer><think>' repeated": (parse_response, lambda n: _fill("<answer><think>", n)),
    "parse_response: tool_call with deep JSON nesting": (
        parse_response, lambda n: _fill("[", n, "<tool_call>", "</tool_call>")),
    "parse_response: '<tool_call>{' repeated": (parse_response, lambda n: _fill("<tool_call>{", n)),
    "vigorl tag_contents(answer): '<answer>' repeated": (
        lambda text: tag_contents(text, "answer"), lambda n: _fill("<answer>", n)),
    "vigorl single_turn_format: '<think>' repeated": (
        single_turn_format, lambda n: _fill("<think>", n, "", "</answer>")),
    "parse_response: huge integer argument": (
        parse_response, lambda n: _fill("9", n, '<tool_call>{"name": "t", "arguments": {"x": ', "}}</tool_call>")),
}

_OLD_SVG = re.compile(r"<svg\b(?:[^>]*/>|.*</svg\s*>)", re.IGNORECASE | re.DOTALL)
ELSEWHERE: dict[str, tuple[Callable[[str], Any], Callable[[int], str], str]] = {
    "old extract_svg pattern (anchor): '<svg ' repeated": (
        _OLD_SVG.search, lambda n: _fill("<svg ", n), "plugins/envs/svg before this change"),
    "old vigorl ANSWER pattern (anchor): '<answer>' repeated": (
        re.compile(r"<answer>(.*?)</answer>", re.DOTALL).search, lambda n: _fill("<answer>", n),
        "plugins/judges/vigorl before this change"),
    "old vigorl SINGLE_TURN_FORMAT pattern (anchor): '<think>' repeated": (
        re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL).search, lambda n: _fill("<think>", n),
        "plugins/judges/vigorl before this change"),
}


def _time(parse: Callable[[str], Any], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        parse(text)
        best = min(best, time.perf_counter() - start)
    return best


def _row(parse: Callable[[str], Any], make: Callable[[int], str], large: int) -> dict[str, Any]:
    small_s = _time(parse, make(SMALL), repeats=5)
    large_s = _time(parse, make(large), repeats=1)
    return {"small_bytes": SMALL, "small_s": round(small_s, 6), "large_bytes": large, "large_s": round(large_s, 4),
            "ratio": round(large_s / max(small_s, 1e-9), 1), "size_ratio": large // SMALL}


def main() -> dict[str, Any]:
    results: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "parsers": {},
                               "elsewhere": {}}
    for name, (parse, make) in CASES.items():
        results["parsers"][name] = _row(parse, make, LARGE)
    for name, (parse, make, owner) in ELSEWHERE.items():
        results["elsewhere"][name] = {**_row(parse, make, 40_000), "where": owner}
    results["max_large_s"] = max(row["large_s"] for row in results["parsers"].values())
    results["linear"] = all(row["ratio"] < row["size_ratio"] * 10 for row in results["parsers"].values())
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

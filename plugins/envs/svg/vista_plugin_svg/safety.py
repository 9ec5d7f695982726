"""Static checks on model-written SVG before anything renders it.

Why a separate gate: the renderer runs in a resource-capped child process (see :mod:`.render`), so
a hostile document cannot hang or exhaust the trainer anyway; but a cap that trips only says
"killed".  These checks catch the known attacks first and say *what* was wrong, so the model gets a
message it can act on:

* size: the text and the element count are capped;
* entity expansion ("billion laughs") and external entities: any ``<!DOCTYPE``/``<!ENTITY`` is
  refused before parsing, and the parser (defusedxml) forbids DTDs as a second line;
* external references: ``href``/``xlink:href`` may only point inside the document (``#id``), and
  ``url(...)`` in attributes or ``<style>`` only to ``#id``; ``@import`` is refused.  No file://,
  http:// or data: payloads reach the renderer;
* deep nesting: the element tree may be at most ``max_depth`` deep (the renderer recurses);
* ``<use>`` amplification (the billion laughs of SVG: each group uses the previous one ten times):
  the element count after expanding every ``<use>`` is capped, and reference cycles are refused;
* huge canvases: a declared ``width``/``height``/``viewBox`` beyond ``max_canvas`` is refused (the
  render size is fixed by the env in any case, so this is about a clear message, not memory).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"  # ElementTree's name for xlink:href
_DTD_RE = re.compile(r"<!\s*(DOCTYPE|ENTITY|ELEMENT|ATTLIST)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Model text is parsed by single linear scans, never by a pattern that backtracks: the former
# ``<svg\b(?:[^>]*/>|.*</svg\s*>)`` restarted its scan at every ``<svg`` ("<svg " * 20000 took 8 s
# holding the GIL), and ``url\(\s*(['"]?)(.*?)\1\s*\)`` did the same at every ``url(``.  The functions
# below give the same results; ``tests/test_parsing.py`` compares them with the old patterns.
_SVG_OPEN_RE = re.compile(r"<svg\b", re.IGNORECASE)
_SVG_CLOSE_RE = re.compile(r"</svg\s*>", re.IGNORECASE)
_URL_OPEN_RE = re.compile(r"url\(\s*", re.IGNORECASE)
_QUOTE_CLOSE_RE = {quote: re.compile(quote + r"\s*\)") for quote in ("'", '"')}


@dataclass(frozen=True)
class SvgLimits:
    """Caps on one model-written SVG document."""

    max_chars: int = 100_000
    max_elements: int = 5_000
    max_depth: int = 48
    max_canvas: float = 8_192.0
    max_expanded_elements: int = 20_000


class UnsafeSvg(ValueError):
    """The SVG was refused; the message is meant for the model."""


def extract_svg(text: str) -> str | None:
    """The ``<svg ...>...</svg>`` block in ``text`` (first opening to last closing tag), or ``None``.

    Models often wrap code in prose or Markdown fences; only the element itself is rendered."""
    last_close = None
    for close in _SVG_CLOSE_RE.finditer(text):  # closing tags never overlap: this is the last one
        last_close = close
    next_gt = -1
    for opening in _SVG_OPEN_RE.finditer(text):
        start, after = opening.start(), opening.end()
        if next_gt < after and next_gt != len(text):  # the first ">" after this "<svg": found once per run
            found = text.find(">", after)
            next_gt = len(text) if found == -1 else found
        if next_gt < len(text) and next_gt > after and text[next_gt - 1] == "/":
            return text[start:next_gt + 1]  # self-closing "<svg .../>"
        if last_close is not None and last_close.start() >= after:
            return text[start:last_close.end()]  # to the last "</svg>", as a greedy ".*" reached it
    return None


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _check_reference(value: str, where: str) -> None:
    if not value.strip().startswith("#"):
        shown = value.strip()[:60]
        raise UnsafeSvg(f"{where} points outside the document ({shown!r}); only internal '#id' references "
                        "are allowed (no file://, http:// or data: URLs)")


def _check_urls(text: str, where: str) -> None:
    if "@import" in text.lower():
        raise UnsafeSvg(f"{where} uses @import; external style sheets are not allowed")
    for target in url_targets(text):
        _check_reference(target, f"url(...) in {where}")


def url_targets(text: str) -> list[str]:
    """What each ``url(...)`` in ``text`` points at, in one linear pass.

    The same as ``[m.group(2) for m in re.finditer(r"url\\(\\s*(['\"]?)(.*?)\\1\\s*\\)", text, re.I | re.S)]``:
    a quoted target ends at the first matching quote followed by ``)``, else the target runs (quote
    included) to the first ``)`` less the whitespace before it; a ``url(`` without any ``)`` after it
    is skipped.  The closing positions are found once for the whole text and looked up by bisection."""
    closes = {quote: [m.start() for m in pattern.finditer(text)] for quote, pattern in _QUOTE_CLOSE_RE.items()}
    parens = [index for index, char in enumerate(text) if char == ")"]
    targets: list[str] = []
    resume = 0
    for opening in _URL_OPEN_RE.finditer(text):
        if opening.start() < resume:
            continue  # inside the previous match, as finditer's matches never overlap
        begin = opening.end()
        quote = text[begin] if begin < len(text) and text[begin] in closes else ""
        if quote:
            positions = closes[quote]
            index = bisect.bisect_left(positions, begin + 1)
            if index < len(positions):
                end = positions[index]
                targets.append(text[begin + 1:end])
                resume = text.index(")", end) + 1
                continue
        index = bisect.bisect_left(parens, begin)
        if index == len(parens):
            break  # no ")" after this url(, so none after any later one either
        close = parens[index]
        end = close
        while end > begin and text[end - 1].isspace():
            end -= 1  # bounded: the run before this ")" is walked once, as later matches start after it
        targets.append(text[begin:end])
        resume = close + 1
    return targets


def _check_canvas(element: Element, limits: SvgLimits) -> None:
    for key in ("width", "height"):
        raw = element.get(key)
        if raw is None:
            continue
        number = _NUMBER_RE.match(raw.strip())
        if number and abs(float(number.group(0))) > limits.max_canvas:
            raise UnsafeSvg(f"{key}={raw.strip()[:40]!r} is larger than the {limits.max_canvas:g} limit")
    view_box = element.get("viewBox")
    if view_box is not None:
        values = [float(v) for v in _NUMBER_RE.findall(view_box)[:4]]
        if any(abs(v) > limits.max_canvas * 16 for v in values):
            raise UnsafeSvg(f"viewBox={view_box.strip()[:60]!r} has values beyond the allowed range")


def _use_target(element: Element, ids: dict[str, Element]) -> Element | None:
    if _local(element.tag) != "use":
        return None
    ref = element.get("href") or element.get(XLINK_HREF) or ""
    return ids.get(ref.strip()[1:]) if ref.strip().startswith("#") else None


def expanded_size(root: Element, limit: int) -> int:
    """How many elements the renderer draws once every ``<use>`` is expanded (capped at ``limit + 1``).

    Iterative depth-first with a memo per element, so ten uses of a group cost one count of it, and
    a chain of uses thousands long cannot overflow the stack; a reference back into an element being
    counted is a cycle and is refused."""
    ids: dict[str, Element] = {}
    for element in root.iter():
        identifier = element.get("id")
        if identifier:
            ids.setdefault(identifier, element)

    def parts(element: Element) -> list[Element]:
        target = _use_target(element, ids)
        return [*element, target] if target is not None else list(element)

    memo: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Element, bool]] = [(root, False)]
    while stack:
        element, finished = stack.pop()
        key = id(element)
        if finished:
            active.discard(key)
            memo[key] = min(limit + 1, 1 + sum(memo[id(part)] for part in parts(element)))
            continue
        if key in memo:
            continue
        active.add(key)
        stack.append((element, True))
        for part in parts(element):
            if id(part) in active:
                raise UnsafeSvg("<use> references form a cycle")
            if id(part) not in memo:
                stack.append((part, False))
    return memo[id(root)]


def check_svg(svg: str, limits: SvgLimits | None = None) -> Element:
    """Parse and check ``svg``; return its root element or raise :class:`UnsafeSvg` with the reason."""
    limits = limits or SvgLimits()
    if len(svg) > limits.max_chars:
        raise UnsafeSvg(f"the SVG has {len(svg):,} characters; the limit is {limits.max_chars:,}")
    if _DTD_RE.search(svg):
        raise UnsafeSvg("DOCTYPE and ENTITY declarations are not allowed (entity expansion is refused)")
    try:
        root = fromstring(svg.encode("utf-8", errors="replace"), forbid_dtd=True, forbid_entities=True,
                          forbid_external=True)
    except DefusedXmlException as exc:
        raise UnsafeSvg(f"refused XML construct: {type(exc).__name__}") from None
    except ParseError as exc:
        raise UnsafeSvg(f"the SVG is not well-formed XML ({exc})") from None
    if _local(root.tag) != "svg":
        raise UnsafeSvg(f"the root element must be <svg>, not <{_local(root.tag)[:30]}>")
    count = 0
    stack: list[tuple[Element, int]] = [(root, 1)]
    while stack:  # iterative: the depth check must not itself recurse
        element, depth = stack.pop()
        count += 1
        if count > limits.max_elements:
            raise UnsafeSvg(f"the SVG has more than {limits.max_elements:,} elements")
        if depth > limits.max_depth:
            raise UnsafeSvg(f"elements are nested more than {limits.max_depth} deep")
        name = _local(element.tag) if isinstance(element.tag, str) else ""
        if name in ("svg", "image", "use", "pattern", "symbol"):
            _check_canvas(element, limits)
        for key, value in element.attrib.items():
            local_key = _local(key)
            if local_key == "href":
                _check_reference(value, f"<{name} {local_key}>")
            elif "url(" in value.lower() or "@import" in value.lower():
                _check_urls(value, f"the {local_key} attribute of <{name}>")
        if name == "style" and element.text:
            _check_urls(element.text, "<style>")
        if name in ("script", "foreignObject"):
            raise UnsafeSvg(f"<{name}> is not allowed")
        stack.extend((child, depth + 1) for child in element)
    if expanded_size(root, limits.max_expanded_elements) > limits.max_expanded_elements:
        raise UnsafeSvg(f"<use> references expand the SVG to more than {limits.max_expanded_elements:,} elements")
    return root

"""How much of a cached conversation a new prompt can reuse: the longest common token prefix,
never ending inside an image and never passing an image that shows a different picture.

Why images need care: an image is a run of identical placeholder ids (``<|image_pad|>`` x n), so two
different pictures of the same size have the same ids.  Token equality alone would reuse the keys
and values computed from the old picture.  Each image span therefore carries the image's content key
(a hash), and the prefix stops at the first span whose key, start or end differ, or that the token
prefix cuts in two.  Why a prefix at all rather than "the previous prompt plus the reply": the
prompt is re-rendered from text each turn, so the reply's re-tokenised ids may differ from the
sampled ones, and with a context window (``rollout.window_size``) the oldest turns drop out, so
the common part can end anywhere, even right after the system prompt.  Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Elements compared per slice when looking for the first difference (C-speed slices, then a scan).
CHUNK = 256


@dataclass(frozen=True)
class ImageSpan:
    """Token positions ``start:end`` hold one image's placeholder ids; ``key`` says which image."""

    start: int
    end: int
    key: str


def image_spans(ids: Sequence[int], image_token_id: int, keys: Sequence[str]) -> list[ImageSpan] | None:
    """Each maximal run of ``image_token_id`` in ``ids`` as one image, paired with ``keys`` in
    order; ``None`` when the runs and the keys do not pair up (a layout with adjacent images and no
    delimiter between them: such a prompt is not cached)."""
    runs: list[tuple[int, int]] = []
    position = _find(ids, image_token_id, 0)
    while position >= 0:
        end = _run_end(ids, image_token_id, position)
        runs.append((position, end))
        position = _find(ids, image_token_id, end)
    if len(runs) != len(keys):
        return None
    return [ImageSpan(start, end, key) for (start, end), key in zip(runs, keys, strict=True)]


def _find(ids: Sequence[int], token: int, start: int) -> int:
    try:
        return ids.index(token, start)
    except ValueError:
        return -1


def _run_end(ids: Sequence[int], token: int, position: int) -> int:
    """Past the run of ``token`` at ``position``: whole chunks compared at C speed, then one by one."""
    for step in (CHUNK, 16, 1):
        run = [token] * step
        while position + step <= len(ids) and ids[position:position + step] == run:
            position += step
    return position


def common_prefix_length(first: Sequence[int], second: Sequence[int], limit: int | None = None) -> int:
    """How many leading elements ``first`` and ``second`` share (at most ``limit``)."""
    bound = min(len(first), len(second)) if limit is None else min(len(first), len(second), limit)
    start = 0
    while start < bound:
        stop = min(start + CHUNK, bound)
        if first[start:stop] != second[start:stop]:
            for position in range(start, stop):
                if first[position] != second[position]:
                    return position
        start = stop
    return bound


def reusable_prefix(cached_ids: Sequence[int], cached_spans: Sequence[ImageSpan], ids: Sequence[int],
                    spans: Sequence[ImageSpan]) -> int:
    """How many leading tokens of the prompt ``ids`` a cache holding ``cached_ids`` can serve.

    At most ``len(ids) - 1``: the last prompt token must be run to give the next token's logits."""
    prefix = common_prefix_length(cached_ids, ids, max(len(ids) - 1, 0))
    cached = {span.start: span for span in cached_spans}
    for span in spans:
        if span.start >= prefix:
            break
        if span.end > prefix or cached.get(span.start) != span:
            return span.start
    return prefix

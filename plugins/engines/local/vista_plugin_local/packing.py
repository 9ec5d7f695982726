"""Where each training row's tokens sit when a micro-batch is scored as packed sequences.

Why: the padded batch pads every row to the longest, and in GRPO the G rows of a group repeat the
same prompt (image tokens, system prompt, history) that is much longer than their replies, so the
update's forward and backward ran the shared prompt G times.  Here the rows of a micro-batch become
a few packed sequences ("bins"); within a bin, rows that start alike are stored as a prefix tree
(a trie): a run of tokens that several rows share (same ids, same images) is stored once, and each
row's own continuation follows it.  The forward runs over the bins with an attention mask in which
every token sees exactly its own row's earlier tokens (its ancestors in the tree) and the position
ids each row has on its own, so every row's hidden states, log-probs and gradients are those of the
padded batch; a shared token's gradient is the sum over the rows that share it, as it was before.

The bins are stored in depth-first order, so each token's subtree is one contiguous range
``[i, end[i])``: query ``q`` sees key ``k`` exactly when ``k <= q < end[k]``.  Without sharing
(``share=False``) every row is its own chain: plain packing with a block-diagonal causal mask.

This module is pure bookkeeping (numpy and index tensors); :mod:`vista_plugin_local.packed_forward`
runs the model over a plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.image_input import ImageInput
from vista_plugin_local.shared_vision import image_key

__all__ = ["PackPlan", "RowKeys", "RowSlot", "common_prefix", "pack_capacity", "plan_packs", "row_keys", "token_keys"]


@dataclass(frozen=True)
class RowSlot:
    """Where one row went: its bin and the packed index of each of its tokens (in row order)."""

    bin: int
    positions: np.ndarray


@dataclass
class PackPlan:
    """The packed sequences of one micro-batch and where every row's tokens are in them."""

    #: ``[bins, length]`` token ids (padding after each bin's tokens).
    input_ids: torch.Tensor
    #: ``[bins, length]``: the end (exclusive) of each position's subtree; padding sees itself only.
    subtree_end: torch.Tensor
    rows: list[RowSlot]
    #: The images of the bins' image tokens in packed order (bin by bin, by position).
    images: list[ImageInput]

    @property
    def tokens(self) -> int:
        """Tokens the forward computes, padding included."""
        return int(self.input_ids.numel())

    def visible(self) -> torch.Tensor:
        """``[bins, length, length]`` boolean: query ``q`` may attend to key ``k``."""
        length = self.input_ids.shape[1]
        index = torch.arange(length, device=self.subtree_end.device)
        query, key = index[:, None], index[None, :]
        return (key <= query)[None] & (query[None] < self.subtree_end[:, None, :])

    def scatter_rows(self, rows: Sequence[torch.Tensor], fill: int = 0) -> torch.Tensor:
        """Per-row values (``[..., len]`` each, in row order) laid out as the bins ``[..., bins,
        length]``.  A shared position gets the same value from each of its rows (ids and positions
        depend only on the tokens before)."""
        bins, length = self.input_ids.shape
        flat = torch.cat(list(rows), dim=-1)
        out = torch.full((*flat.shape[:-1], bins, length), fill, dtype=flat.dtype, device=flat.device)
        bin_index, pack_index, _, _ = self.flat_index([row.shape[-1] for row in rows], flat.device)
        out[..., bin_index, pack_index] = flat
        return out

    def flat_index(self, lengths: Sequence[int], device: torch.device | str = "cpu",
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """For every token of every row: (bin, packed position, row, position in the row)."""
        bins = np.concatenate([np.full(n, slot.bin) for slot, n in zip(self.rows, lengths, strict=True)])
        packed = np.concatenate([slot.positions[:n] for slot, n in zip(self.rows, lengths, strict=True)])
        rows = np.concatenate([np.full(n, r) for r, n in enumerate(lengths)])
        columns = np.concatenate([np.arange(n) for n in lengths])
        return tuple(torch.as_tensor(a, dtype=torch.long, device=device)  # type: ignore[return-value]
                     for a in (bins, packed, rows, columns))


@dataclass(frozen=True)
class RowKeys:
    """A row's tokens as comparable integers, and where each of its images starts."""

    keys: np.ndarray
    image_starts: list[int]

    def __len__(self) -> int:
        return len(self.keys)


def token_keys(seq: EpisodeTokens, image_token_id: int, vision_tokens: Callable[[ImageInput], int],
               interned: dict[str, int]) -> RowKeys:
    """The row's tokens as comparable integers: a text token is its id; every token of an image is
    ``-(n + 1)`` for the image's content (its :func:`~vista_plugin_local.shared_vision.image_key`,
    numbered in ``interned``), so two rows share a run only where their ids *and* images agree."""
    keys = np.asarray(seq.input_ids, dtype=np.int64)
    spots = np.flatnonzero(keys == image_token_id)
    counts = [int(vision_tokens(image)) for image in seq.images]
    if sum(counts) != len(spots):
        raise ValueError(f"a training row has {len(spots)} image tokens but its {len(counts)} image(s) "
                         f"need {sum(counts)}")
    start, starts = 0, []
    for image, count in zip(seq.images, counts, strict=True):
        if count < 1:
            raise ValueError("an image of a training row has no image tokens")
        number = interned.setdefault(image_key(image), len(interned))
        keys[spots[start:start + count]] = -(number + 1)
        starts.append(int(spots[start]))
        start += count
    return RowKeys(keys, starts)


def row_keys(seqs: Sequence[EpisodeTokens], image_token_id: int,
             vision_tokens: Callable[[ImageInput], int]) -> list[RowKeys]:
    """:func:`token_keys` of every row, the images numbered alike across all of them."""
    interned: dict[str, int] = {}
    return [token_keys(seq, image_token_id, vision_tokens, interned) for seq in seqs]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading entries ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def pack_capacity(text_config: Any, longest: int) -> int:
    """Tokens one bin may hold: at least the longest row, else where a bin's masked attention
    (every query against every key of its bin) costs as much as the per-token projections and MLP.

    Why a bound: the dense mask spends attention work on keys a query may not see, so one bin of a
    whole micro-batch would trade the saved projections for quadratic attention."""
    hidden = int(text_config.hidden_size)
    heads = int(text_config.num_attention_heads)
    kv_heads = int(getattr(text_config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text_config, "head_dim", None) or hidden // heads)
    per_token = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * int(
        text_config.intermediate_size)
    per_key = 2 * heads * head_dim
    return max(longest, per_token // per_key)


#: Bins of rows: each row with the packed position of each of its tokens.
Bins = list[list[tuple[int, np.ndarray]]]


def _tree_size(shared: Sequence[int], lengths: Sequence[int], lo: int, hi: int) -> int:
    """Tokens of the prefix tree of sorted rows ``lo`` to ``hi`` (exclusive)."""
    return lengths[lo] + sum(lengths[k] - shared[k] for k in range(lo + 1, hi))


def _pieces(shared: Sequence[int], lengths: Sequence[int], capacity: int) -> list[tuple[int, int]]:
    """Ranges of the sorted rows whose tree fits ``capacity`` (or that are one row), cut where the
    neighbours share least (a group's boundary before a reply's), nearest the middle on ties."""
    out: list[tuple[int, int]] = []
    stack = [(0, len(lengths))]
    while stack:
        lo, hi = stack.pop()
        if hi - lo == 1 or _tree_size(shared, lengths, lo, hi) <= capacity:
            out.append((lo, hi))
            continue
        cut = min(range(lo + 1, hi), key=lambda k: (shared[k], abs((k - lo) - (hi - k))))
        stack += [(cut, hi), (lo, cut)]
    return out


def _bins_shared(order: Sequence[int], shared: Sequence[int], lengths: Sequence[int],
                 pieces: Sequence[tuple[int, int]], limit: int) -> Bins:
    """Neighbouring ``pieces`` of the sorted rows merged while the bin stays within ``limit``; each
    bin a prefix tree: a row reuses the positions of what it shares with the bin's previous row
    (``shared[i]``: tokens sorted row ``i`` has in common with row ``i - 1``), then adds its own."""
    bins: Bins = []
    length = 0
    for lo, hi in pieces:
        if not bins or length + _tree_size(shared, lengths, lo, hi) - shared[lo] > limit:
            bins.append([])
            length = 0
        for i in range(lo, hi):
            row = order[i]
            common = shared[i] if bins[-1] else 0
            previous = bins[-1][-1][1] if bins[-1] else np.zeros(0, dtype=np.int64)
            added = lengths[i] - common
            bins[-1].append((row, np.concatenate([previous[:common], np.arange(length, length + added)])))
            length += added
    return bins


def _bins_plain(lengths: Sequence[int], capacity: int) -> Bins:
    """First-fit decreasing: each row a chain of its own in the first bin it fits in."""
    bins: Bins = []
    used: list[int] = []
    for row in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
        target = next((b for b, n in enumerate(used) if n + lengths[row] <= capacity), None)
        if target is None:
            bins.append([])
            used.append(0)
            target = len(bins) - 1
        bins[target].append((row, np.arange(used[target], used[target] + lengths[row])))
        used[target] += lengths[row]
    return bins


def _bin_length(members: list[tuple[int, np.ndarray]]) -> int:
    return max(int(positions[-1]) + 1 for _, positions in members)


def _balanced(make: Callable[[int], Bins], total: int, longest: int, capacity: int) -> Bins:
    """The bins that compute the fewest tokens, padding included (every bin is padded to the
    longest): bins of at most ``capacity`` (at least ``longest``) are tried at the sizes that split
    ``total`` tokens evenly into 1, 2, ... bins; ties go to the shorter bins (less attention)."""
    best: tuple[int, int] | None = None
    chosen: Bins = []
    for count in range(1, max(1, -(-total // max(longest, 1)) + 1) + 1):  # until a bin holds about one row
        size = max(longest, -(-total // count))
        if size > capacity:
            continue
        bins = make(size)
        length = max(_bin_length(members) for members in bins)
        cost = (len(bins) * length, length)
        if best is None or cost < best:
            best, chosen = cost, bins
        if size == longest:
            break
    return chosen or make(max(capacity, longest))


def plan_packs(seqs: Sequence[EpisodeTokens], keys: Sequence[RowKeys], *, share: bool, capacity: int,
               pad_id: int) -> PackPlan:
    """Pack ``seqs`` (with their :func:`token_keys`) into bins of at most ``capacity`` tokens (a row
    longer than that gets a bin of its own length); ``share``: rows share their common prefixes."""
    if any(len(seq) == 0 for seq in seqs):
        raise ValueError("cannot pack an empty training row")
    lengths = [len(seq) for seq in seqs]
    if share:
        order = sorted(range(len(keys)), key=lambda r: keys[r].keys.tolist())
        shared = [0] + [common_prefix(keys[a].keys, keys[b].keys) for a, b in zip(order, order[1:], strict=False)]
        sorted_lengths = [lengths[row] for row in order]
        pieces = _pieces(shared, sorted_lengths, capacity)
        largest = max(_tree_size(shared, sorted_lengths, lo, hi) for lo, hi in pieces)
        grouped = _balanced(lambda size: _bins_shared(order, shared, sorted_lengths, pieces, size),
                            sum(sorted_lengths) - sum(shared), largest, max(capacity, largest))
    else:
        grouped = _balanced(lambda size: _bins_plain(lengths, size), sum(lengths), max(lengths), capacity)
    slots: list[RowSlot | None] = [None] * len(seqs)
    width = max(_bin_length(members) for members in grouped)
    ids = torch.full((len(grouped), width), pad_id, dtype=torch.long)
    end = torch.arange(1, width + 1).repeat(len(grouped), 1)  # padding: itself only
    firsts: dict[tuple[int, int], ImageInput] = {}
    for b, members in enumerate(grouped):
        for row, positions in members:
            slots[row] = RowSlot(b, positions)
            index = torch.as_tensor(positions)
            ids[b, index] = torch.tensor(seqs[row].input_ids, dtype=torch.long)
            # every token of this row has the row's last token in its subtree
            end[b].scatter_reduce_(0, index, torch.full_like(index, int(positions[-1]) + 1), reduce="amax")
            for image, start in zip(seqs[row].images, keys[row].image_starts, strict=True):
                firsts.setdefault((b, int(positions[start])), image)
    images = [firsts[key] for key in sorted(firsts)]
    assert all(slot is not None for slot in slots)
    return PackPlan(ids, end, [slot for slot in slots if slot is not None], images)

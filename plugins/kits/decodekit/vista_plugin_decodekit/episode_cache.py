"""Each episode's KV cache kept between turns, so a turn prefills only what it adds.

Why: every turn of a multi-turn episode used to prefill the whole history again, so a turn's cost
grew with the turn number and 12-turn episodes cost 8.5x per turn what 2-turn ones did (issue 36).
Here the keys and values of an episode's last prompt and reply are kept, by an episode key its
caller gives (the rollout engine: one per episode, ended when the episode ends), and the next
turn runs only the tokens past the longest prefix they share (:mod:`~vista_plugin_decodekit.prefix`).

One ``generate`` call serves rows with different cached lengths.  With ``P`` the longest reused
prefix and ``N`` the longest new block, every row is laid out on ``P + N`` columns::

    row r:  [ padding | its reused prefix (p_r) ][ padding | its new tokens (n_r) ]
             <-------------- P ---------------->  <-------------- N -------------->

The first ``P`` columns come from the cache (each row's kept keys/values, right-aligned), the rest
is prefilled by ``generate`` itself (it runs the input ids past the cache's length); padding is
masked out, every row's last prompt token sits in the last column, and each row's positions are
given explicitly (:mod:`~vista_plugin_decodekit.positions`), so they are those of its own tokens
whatever the padding.  Only the images inside the new blocks are passed (their pixels are encoded;
the cached ones are not).  After ``generate``, each row's real columns (prefix, block, the reply
tokens that were fed back) are copied out as the episode's new entry.

Memory: entries live on the model's device and count against ``max_mb``.  Storing an entry that
does not fit first evicts entries not used by the current call, least recently used first; if it
still does not fit it is not kept, and that episode's next turn is a full prefill, counted in
:class:`EpisodeCacheStats` (``over_budget_rows``).  :meth:`EpisodeKVCache.end` frees an episode at once.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from vista_plugin_decodekit.buffers import PreallocatedLayer
from vista_plugin_decodekit.positions import PositionScheme, position_scheme, unwrap
from vista_plugin_decodekit.prefix import ImageSpan, image_spans, reusable_prefix
from vista_plugin_decodekit.staging import StagingPool

#: Default bound on the memory the kept caches hold.
DEFAULT_EPISODE_CACHE_MB = 1024.0
#: Tensors of a call's layout at least this large come from the reused buffers (:mod:`~vista_plugin_decodekit.staging`).
STAGED_BYTES = 1 << 20


class VisionInput(Protocol):
    """One image of a prompt: which picture it is (a content hash) and the model's inputs for it
    (per key, concatenated along the first axis for a batch: ``pixel_values``, ``image_grid_thw``)."""

    @property
    def key(self) -> str: ...

    @property
    def tensors(self) -> Mapping[str, torch.Tensor]: ...


@dataclass
class RowPrompt:
    """One row of a ``generate`` call: its episode (``None``: not cached), prompt ids and images."""

    key: str | None
    ids: list[int]
    images: Sequence[VisionInput]


@dataclass
class EpisodeCacheStats:
    """What the cache did (cumulative).  ``full_prefill_rows``: rows with an episode key that ran
    their whole prompt (first turn, nothing in common, or not kept); ``over_budget_rows``: rows whose
    cache was not kept because it did not fit in ``max_mb``; ``bytes``/``peak_bytes``: held now/at most."""

    rows: int = 0
    reused_rows: int = 0
    full_prefill_rows: int = 0
    uncacheable_rows: int = 0
    over_budget_rows: int = 0
    evicted: int = 0
    ended: int = 0
    reused_tokens: int = 0
    prefilled_tokens: int = 0
    entries: int = 0
    bytes: int = 0
    peak_bytes: int = 0


@dataclass
class _Entry:
    ids: list[int]
    spans: list[ImageSpan]
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [heads, length, dim]
    position_max: torch.Tensor  # [length]: the largest position up to each token (where a block continues)
    size: int
    used: int = 0


@dataclass
class _RowPlan:
    key: str | None
    ids: list[int]
    spans: list[ImageSpan] | None
    reused: int
    block: int
    position_max: torch.Tensor  # [reused + block]


@dataclass
class CachedBatch:
    """The ``generate`` keyword arguments of one call (``inputs``) and what :meth:`EpisodeKVCache.keep`
    needs afterwards.  ``inputs`` holds ``input_ids``, ``attention_mask``, ``position_ids``, the cache
    under the model's keyword and the new images' tensors."""

    inputs: dict[str, Any]
    rows: list[_RowPlan]
    width: int
    reused: int
    cache: Any = field(repr=False)
    #: the reused buffers the call's tensors live in, given back by :meth:`EpisodeKVCache.keep`
    held: list[torch.Tensor] = field(default_factory=list, repr=False)


def _size(tensors: Iterable[torch.Tensor]) -> int:
    return sum(int(tensor.numel()) * int(tensor.element_size()) for tensor in tensors)


class EpisodeKVCache:
    """The kept caches of one model (see the module docstring).  Thread-safe.

    ``enabled`` is false (and ``why_not`` says why) for a model whose positions or cache layers
    this module does not handle; callers then prefill whole prompts as before."""

    def __init__(self, model: Any, max_mb: float = DEFAULT_EPISODE_CACHE_MB) -> None:
        self.model = model
        self.max_bytes = int(max_mb * 2**20)
        self.stats = EpisodeCacheStats()
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._tick = 0
        #: the call layouts' large tensors, reused between calls (idle ones count apart from ``max_mb``)
        self.staging = StagingPool(self.max_bytes)
        self.scheme: PositionScheme | None
        self.scheme, self.why_not = position_scheme(model)
        inner = unwrap(model)
        self.image_token_id = int(getattr(inner.config, "image_token_id", -1) or -1)
        self.cache_keyword = "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"
        if self.scheme is not None and self.why_not is None:
            self.why_not = self._layers_problem()
        if max_mb <= 0:
            self.why_not = "episode cache turned off (0 MB)"

    @property
    def enabled(self) -> bool:
        return self.why_not is None and self.scheme is not None

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=unwrap(self.model).config)

    def _layers_problem(self) -> str | None:
        from transformers.cache_utils import DynamicLayer

        layers = list(getattr(self._new_cache(), "layers", []))
        if not layers:
            return "the model's config does not say its cache layers"
        odd = [type(layer).__name__ for layer in layers
               if type(layer) is not DynamicLayer or getattr(layer, "is_sliding", False)]
        return f"cache layers {sorted(set(odd))} are not plain dynamic layers" if odd else None

    # ------------------------------------------------------------------ planning
    def plan(self, rows: Sequence[RowPrompt], pad_id: int, device: Any, max_new_tokens: int = 0) -> CachedBatch:
        """The inputs of one ``generate`` call over ``rows`` (see the module docstring); its cache
        has room for ``max_new_tokens`` more positions (:mod:`~vista_plugin_decodekit.buffers`)."""
        assert self.scheme is not None, "plan() needs an enabled cache"
        scheme = self.scheme
        with self._lock:
            self._tick += 1
            plans, entries = zip(*[self._row_plan(row) for row in rows], strict=True)
        reused = max(plan.reused for plan in plans)
        width = reused + max(plan.block for plan in plans)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        positions = scheme.layout(len(rows), width)
        pixels: list[Mapping[str, torch.Tensor]] = []
        for index, (row, plan, entry) in enumerate(zip(rows, plans, entries, strict=True)):
            prefix, block = plan.reused, plan.block
            ids[index, reused - prefix:reused] = torch.tensor(row.ids[:prefix], dtype=torch.long)
            ids[index, width - block:] = torch.tensor(row.ids[prefix:], dtype=torch.long)
            mask[index, reused - prefix:reused] = 1
            mask[index, width - block:] = 1
            images = self._block_images(row, plan)
            pixels.extend(images)
            offset = int(entry.position_max[prefix - 1]) + 1 if entry is not None and prefix else 0
            block_positions = scheme.block(ids[index, width - block:], images, prefix, offset)
            scheme.place(positions, index, slice(width - block, width), block_positions, prefix)
            highest = block_positions.view(-1, block).max(dim=0).values.cummax(dim=0).values
            before = entry.position_max[:prefix].cpu() if entry is not None else torch.zeros(0, dtype=torch.long)
            plan.position_max = torch.cat([before, highest])
        held: list[torch.Tensor] = []
        cache = self._batch_cache(plans, entries, reused, width + max_new_tokens, held)
        inputs: dict[str, Any] = {"input_ids": ids.to(device), "attention_mask": mask.to(device),
                                  "position_ids": positions.to(device), self.cache_keyword: cache}
        if pixels:
            inputs.update({key: self._concat([image[key] for image in pixels], held).to(device) for key in pixels[0]})
        return CachedBatch(inputs, list(plans), width, reused, cache, held)

    def _concat(self, parts: Sequence[torch.Tensor], held: list[torch.Tensor]) -> torch.Tensor:
        """``torch.cat(parts)``, into a reused buffer when it is large (see :mod:`~vista_plugin_decodekit.staging`)."""
        first = parts[0]
        shape = (sum(int(part.shape[0]) for part in parts), *first.shape[1:])
        if int(first.element_size()) * int(torch.Size(shape).numel()) < STAGED_BYTES or \
                any(part.dtype != first.dtype or part.device != first.device for part in parts):
            return torch.cat(list(parts), dim=0)
        return torch.cat(list(parts), dim=0, out=self.staging.take(shape, first.dtype, first.device, held))

    def _row_plan(self, row: RowPrompt) -> tuple[_RowPlan, _Entry | None]:
        stats = self.stats
        spans = image_spans(row.ids, self.image_token_id, [image.key for image in row.images]) \
            if row.key is not None else None
        entry = self._entries.get(row.key) if row.key is not None and spans is not None else None
        prefix = reusable_prefix(entry.ids, entry.spans, row.ids, spans) if entry is not None and spans is not None else 0
        if row.key is not None:
            stats.rows += 1
            if spans is None:
                stats.uncacheable_rows += 1
            elif prefix:
                stats.reused_rows += 1
                assert entry is not None
                entry.used = self._tick
            else:
                stats.full_prefill_rows += 1
        stats.reused_tokens += prefix
        stats.prefilled_tokens += len(row.ids) - prefix
        plan = _RowPlan(row.key, row.ids, spans, prefix, len(row.ids) - prefix, torch.zeros(0, dtype=torch.long))
        return plan, (entry if prefix else None)

    @staticmethod
    def _block_images(row: RowPrompt, plan: _RowPlan) -> list[Mapping[str, torch.Tensor]]:
        """The tensors of the images inside the row's new block (those of the reused prefix are cached)."""
        if plan.spans is None:
            return [image.tensors for image in row.images]
        return [image.tensors for image, span in zip(row.images, plan.spans, strict=True)
                if span.start >= plan.reused]

    def _batch_cache(self, plans: Sequence[_RowPlan], entries: Sequence[_Entry | None], reused: int,
                     capacity: int, held: list[torch.Tensor]) -> Any:
        """A dynamic cache of ``capacity`` positions per layer with each row's reused prefix
        right-aligned in the first ``reused`` columns; its buffers come from the staging pool."""
        cache = self._new_cache()

        def take(shape: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
            return self.staging.take(shape, dtype, device, held)

        cache.layers = [PreallocatedLayer(capacity, take) for _ in cache.layers]
        donor = next((entry for entry in entries if entry is not None), None)
        if donor is None or not reused:
            return cache
        for index, (layer, (keys, _)) in enumerate(zip(cache.layers, donor.layers, strict=True)):
            layer.allocate(len(plans), int(keys.shape[0]), int(keys.shape[2]), keys.dtype, keys.device)
            key_buffer, value_buffer = layer.buffers()
            for row, (plan, entry) in enumerate(zip(plans, entries, strict=True)):
                start = reused - plan.reused
                if start:  # masked padding, zeroed (what the buffer held before could be NaN)
                    key_buffer[row, :, :start] = 0
                    value_buffer[row, :, :start] = 0
                if entry is not None:
                    key_buffer[row, :, start:reused] = entry.layers[index][0][:, :plan.reused]
                    value_buffer[row, :, start:reused] = entry.layers[index][1][:, :plan.reused]
            layer.fill(reused)
        return cache

    # ------------------------------------------------------------------- keeping
    def keep(self, batch: CachedBatch, sequences: torch.Tensor, eos_ids: Sequence[int], cache: Any = None) -> None:
        """Store each keyed row's cache after ``generate``: its prompt and the reply tokens fed back
        (up to and with its first EOS).  ``sequences``: ``generate``'s output ids; ``cache``: the
        cache it returned (default: the one planned, which ``generate`` grows in place; a static
        cache when the call ran on one instead, :mod:`~vista_plugin_decodekit.static_decode`, whose
        rows past ``batch``'s are padding and are not kept).  The
        call's staged buffers go back to the pool after it: nothing may read its inputs or cache then."""
        try:
            self._keep(batch, sequences, eos_ids, cache)
        finally:
            held, batch.held = batch.held, []
            self.staging.give(held)

    def _keep(self, batch: CachedBatch, sequences: torch.Tensor, eos_ids: Sequence[int], cache: Any) -> None:
        layers = list(getattr(cache if cache is not None else batch.cache, "layers", []))
        if not layers:
            return
        # the columns written: the prompt and every sampled token but the last (never fed back); a
        # static cache's layers are longer (their unwritten tail), a dynamic one's are exactly that
        held = min(int(layers[0].keys.shape[-2]), int(sequences.shape[1]) - 1)
        generated_fed = held - batch.width
        eos = set(eos_ids)
        with self._lock:
            for plan in batch.rows:  # replaced below (or dropped, when the new one does not fit)
                self._release(plan.key)
            current = {plan.key for plan in batch.rows if plan.key is not None}
            for row, plan in enumerate(batch.rows):
                if plan.key is None or plan.spans is None:
                    continue
                reply = sequences[row, batch.width:batch.width + generated_fed].tolist()
                fed = next((position + 1 for position, token in enumerate(reply) if token in eos), len(reply))
                entry = self._row_entry(layers, batch, row, plan, reply[:fed])
                if self._make_room(entry.size, current):
                    entry.used = self._tick
                    self._entries[plan.key] = entry
                    self._account(entry.size)
                else:
                    self.stats.over_budget_rows += 1

    def _row_entry(self, layers: Sequence[Any], batch: CachedBatch, row: int, plan: _RowPlan,
                   reply: list[int]) -> _Entry:
        width, reused = batch.width, batch.reused
        device = layers[0].keys.device
        columns = torch.cat([torch.arange(reused - plan.reused, reused), torch.arange(width - plan.block, width),
                             torch.arange(width, width + len(reply))]).to(device)
        kept = [(layer.keys[row].index_select(1, columns), layer.values[row].index_select(1, columns))
                for layer in layers]
        last = int(plan.position_max[-1]) if plan.position_max.numel() else -1
        position_max = torch.cat([plan.position_max, torch.arange(last + 1, last + 1 + len(reply))])
        size = _size(tensor for pair in kept for tensor in pair) + _size([position_max])
        assert plan.spans is not None
        return _Entry(plan.ids + reply, list(plan.spans), kept, position_max, size)

    def _make_room(self, size: int, protected: set[str]) -> bool:
        if size > self.max_bytes:
            return False
        while self.stats.bytes + size > self.max_bytes:
            victims = [key for key in self._entries if key not in protected]
            if not victims:
                return False
            oldest = min(victims, key=lambda key: self._entries[key].used)
            self._release(oldest)
            self.stats.evicted += 1
        return True

    def _account(self, size: int) -> None:
        self.stats.bytes += size
        self.stats.entries = len(self._entries)
        self.stats.peak_bytes = max(self.stats.peak_bytes, self.stats.bytes)

    def _release(self, key: str | None) -> bool:
        entry = self._entries.pop(key, None) if key is not None else None
        if entry is None:
            return False
        self.stats.bytes -= entry.size
        self.stats.entries = len(self._entries)
        return True

    # ------------------------------------------------------------------- the end
    def end(self, keys: Iterable[str]) -> None:
        """Free these episodes' caches now (their episodes ended)."""
        with self._lock:
            for key in keys:
                if self._release(key):
                    self.stats.ended += 1

    def clear(self) -> None:
        """Free every kept cache (e.g. the weights changed) and the idle staged buffers."""
        with self._lock:
            for key in list(self._entries):
                self._release(key)
        self.staging.clear()

    def reset_peak(self) -> None:
        """Start a new ``peak_bytes`` measurement from what is held now (benchmarks)."""
        with self._lock:
            self.stats.peak_bytes = self.stats.bytes

    def held(self, key: str) -> int:
        """Tokens kept for episode ``key`` (0 when none)."""
        with self._lock:
            entry = self._entries.get(key)
            return len(entry.ids) if entry is not None else 0

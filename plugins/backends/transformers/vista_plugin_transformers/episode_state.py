"""The transformers backend's per-episode state: each episode's KV cache between turns.

Why here and not in the backend: the backend's ``generate`` stays one path for every caller (the
rollout engine, ``vista serve``, a trainer), and only a caller that says which episode each chat
belongs to (``generate(..., episode_keys=...)``, as :class:`vista_rl.rollout.RolloutEngine` does)
gets its episodes' caches kept; the cache itself, shared with the local engine, is
:class:`vista_plugin_decodekit.EpisodeKVCache`.  The prompt ids and image tensors come from the
backend's per-message encoder (:mod:`~vista_plugin_transformers.prompt_ids`).

Default size: on when the static-cache decode is not (``episode_cache_mb=None``: 1024 MB on CPU,
0 on CUDA where the compiled static decode of issue 25 runs; the two are not combined yet and the
combination was not measured on a GPU).  An explicit size turns it on anywhere; 0 turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vista_plugin_decodekit import DEFAULT_EPISODE_CACHE_MB, CachedBatch, EpisodeKVCache, RowPrompt
from vista_plugin_decodekit.static_decode import StaticDecoder

from vista_plugin_transformers.prompt_ids import EncodedImage
from vista_rl.chat_render import RenderedIds


def episode_cache_size(requested: float | None, static: StaticDecoder, model: Any, device: str) -> float:
    """The cache's bound in MB: ``requested``, or the default described in the module docstring."""
    if requested is not None:
        if requested < 0:
            raise ValueError(f"episode_cache_mb must be >= 0 (0 turns the cache off), not {requested}")
        return float(requested)
    static_on, _ = static.active(model, device)
    return 0.0 if static_on else DEFAULT_EPISODE_CACHE_MB


class EpisodeState:
    """Which episodes' caches are kept, and the ``generate`` inputs that reuse them."""

    def __init__(self, model: Any, max_mb: float) -> None:
        self.cache = EpisodeKVCache(model, max_mb)

    @property
    def enabled(self) -> bool:
        return self.cache.enabled

    def plan(self, prompts: Sequence[RenderedIds[EncodedImage]], keys: Sequence[str | None], pad_id: int,
             device: str, max_new_tokens: int) -> CachedBatch:
        """The inputs of one ``generate`` call whose rows continue these episodes."""
        rows = [RowPrompt(key, prompt.ids, prompt.images) for key, prompt in zip(keys, prompts, strict=True)]
        return self.cache.plan(rows, pad_id, device, max_new_tokens)

    def keep(self, batch: CachedBatch, output: Any, eos_ids: Sequence[int]) -> None:
        """After ``generate``: keep each row's cache (``output``: its ``return_dict_in_generate`` result)."""
        returned = getattr(output, "cache", None)
        if returned is None:
            returned = getattr(output, "past_key_values", None)
        self.cache.keep(batch, output.sequences, eos_ids, returned)

    def end(self, keys: Sequence[str]) -> None:
        self.cache.end(keys)

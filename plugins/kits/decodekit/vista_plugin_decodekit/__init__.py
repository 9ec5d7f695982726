"""The decoding kit the transformers backend and the local engine share: each episode's KV cache
kept between turns (:mod:`~vista_plugin_decodekit.episode_cache`), with the longest reusable prefix
(:mod:`~vista_plugin_decodekit.prefix`) and the positions of appended tokens per model family
(:mod:`~vista_plugin_decodekit.positions`); and the static-cache decode
(:mod:`~vista_plugin_decodekit.static_decode`: a static KV cache and a compiled step on CUDA).
A library, not a plugin: importing it registers nothing.
"""

from vista_plugin_decodekit.episode_cache import (
    DEFAULT_EPISODE_CACHE_MB,
    CachedBatch,
    EpisodeCacheStats,
    EpisodeKVCache,
    RowPrompt,
    VisionInput,
)
from vista_plugin_decodekit.prefix import ImageSpan, common_prefix_length, image_spans, reusable_prefix
from vista_plugin_decodekit.static_decode import StaticDecoder, StaticDecodeStats, StaticMode, StaticPlan

__all__ = ["DEFAULT_EPISODE_CACHE_MB", "CachedBatch", "EpisodeCacheStats", "EpisodeKVCache", "ImageSpan", "RowPrompt",
           "StaticDecodeStats", "StaticDecoder", "StaticMode", "StaticPlan", "VisionInput", "common_prefix_length",
           "image_spans", "reusable_prefix"]

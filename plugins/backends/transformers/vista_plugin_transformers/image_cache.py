"""Processed images cached per image, so a multi-turn episode's turn k does not run the image
processor again on the images of turns 1..k-1.

:class:`CachedImageProcessor` stands in for a processor's ``image_processor``: the processor calls
it with the chat's images as it would the real one, and it returns the concatenation of each image's
own output, computed once per image content (:func:`vista_rl.store.image_hash`, itself cached on the
image object) and kept in a bounded LRU.  The processor's own text handling (expanding one image
token into as many as the image's grid needs) is untouched, so this works for any processor whose
image outputs concatenate along the first axis (Qwen2-VL's flat patch rows and ``image_grid_thw``,
LLaVA-style ``[images, C, H, W]``).  That is checked, not assumed: the first call with two or more
images also runs the real processor on the batch and compares; if the tensors differ in any way the
cache switches itself off for good and every call goes to the real processor.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from typing import Any

from vista_rl.store import image_hash

DEFAULT_CACHE_MB = 1024


def _size_bytes(features: dict[str, Any]) -> int:
    total = 0
    for value in features.values():
        numel, itemsize = getattr(value, "numel", None), getattr(value, "element_size", None)
        if callable(numel) and callable(itemsize):
            total += int(numel()) * int(itemsize())
    return total


class CachedImageProcessor:
    """A caching proxy for an image processor (see the module docstring).  Thread-safe."""

    def __init__(self, inner: Any, max_mb: float = DEFAULT_CACHE_MB) -> None:
        self.inner = inner
        self.max_bytes = int(max_mb * 2**20)
        self.enabled: bool | None = None  # None until the first multi-image call has checked it
        self.hits = 0
        self.misses = 0
        self.miss_seconds = 0.0  # time in the real processor on misses: what the cache could not save
        self._entries: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # merge_size, patch_size, ... as the processor reads them

    def __call__(self, images: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self.enabled is False or args or not isinstance(images, list) or not images:
            return self.inner(images, *args, **kwargs)
        options = repr(sorted(kwargs.items()))
        try:
            parts = [self._one(image, options, kwargs) for image in images]
            combined = self._concat(parts)
        except Exception:  # noqa: BLE001 - outputs that do not split per image: the real processor
            self.enabled = False
            return self.inner(images, *args, **kwargs)
        if self.enabled is None and len(images) > 1:
            self.enabled = self._same(combined, self.inner(images, **kwargs))
            if not self.enabled:
                with self._lock:
                    self._entries.clear()
                    self._bytes = 0
                return self.inner(images, *args, **kwargs)
        from transformers import BatchFeature

        return BatchFeature(data=combined)

    def _one(self, image: Any, options: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        key = (image_hash(image), options)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        started = time.perf_counter()
        features = dict(self.inner([image], **kwargs))
        spent = time.perf_counter() - started
        size = _size_bytes(features)
        with self._lock:
            self.misses += 1
            self.miss_seconds += spent
            if key not in self._entries and size <= self.max_bytes:
                self._entries[key] = features
                self._bytes += size
                while self._bytes > self.max_bytes and self._entries:
                    _, dropped = self._entries.popitem(last=False)
                    self._bytes -= _size_bytes(dropped)
        return features

    @staticmethod
    def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        keys = list(parts[0])
        if any(list(part) != keys for part in parts):
            raise ValueError("per-image outputs differ in their keys")
        return {key: parts[0][key] if len(parts) == 1 else torch.cat([part[key] for part in parts], dim=0)
                for key in keys}

    @staticmethod
    def _same(combined: dict[str, Any], batched: Any) -> bool:
        import torch

        reference = dict(batched)
        if set(reference) != set(combined):
            return False
        return all(isinstance(value, torch.Tensor) and isinstance(combined[key], torch.Tensor)
                   and value.shape == combined[key].shape and torch.equal(value, combined[key])
                   for key, value in reference.items())


def caching_processor(processor: Any, max_mb: float = DEFAULT_CACHE_MB) -> tuple[Any, CachedImageProcessor | None]:
    """A shallow copy of ``processor`` whose ``image_processor`` is cached (the original is left as
    it is, since a training engine may share it), or ``(processor, None)`` when it has none."""
    inner = getattr(processor, "image_processor", None)
    if inner is None:
        return processor, None
    cache = CachedImageProcessor(inner, max_mb)
    clone = copy.copy(processor)
    clone.image_processor = cache
    return clone, cache

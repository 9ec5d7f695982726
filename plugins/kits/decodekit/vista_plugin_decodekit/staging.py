"""Large per-call tensors reused from one ``generate`` call to the next.

Why: every call of a batched rollout lays out tensors of tens of megabytes (the new images'
pixels concatenated, the KV buffers of :mod:`~vista_plugin_decodekit.buffers`) and drops them
after the call.  A fresh tensor that large is above glibc's mmap threshold, so its pages are mapped,
faulted in and zeroed by the kernel on every call and unmapped after it.  Measured on this
project's 2-core CPU machine: concatenating 64 images' pixels (64 x 144 x 1176 float32, 43 MB) took
30.5 ms into a new tensor and 3.5 ms into a reused one, about 0.4 ms per env-turn at batch 64,
most of the batch layout's cost (issue 36).

A buffer is taken out of the pool for one call and given back after it, so two calls running at
once never share one; the pool keeps at most ``max_bytes`` of idle buffers.  Buffers are made in
power-of-two sizes and one is handed out only for a request at least a quarter of its size.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch


def bucket(numel: int) -> int:
    """The size a buffer for ``numel`` elements is made with: the next power of two, so that a
    layout growing a little every turn (a longer history) finds last turn's buffer big enough."""
    return 1 << max(int(numel) - 1, 0).bit_length()


class StagingPool:
    """Idle flat buffers by dtype and device, handed out as views of the shape asked for."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(int(max_bytes), 0)
        self._free: list[torch.Tensor] = []
        self._bytes = 0
        self._lock = threading.Lock()
        #: buffers reused and newly allocated (tests, benchmarks)
        self.reused = 0
        self.allocated = 0

    @staticmethod
    def _bytes_of(buffer: torch.Tensor) -> int:
        return int(buffer.numel()) * int(buffer.element_size())

    def take(self, shape: Sequence[int], dtype: torch.dtype, device: Any, held: list[torch.Tensor]) -> torch.Tensor:
        """An uninitialised tensor of ``shape``; its buffer is appended to ``held`` (give it back
        with :meth:`give` once nothing reads the tensor any more)."""
        numel = 1
        for extent in shape:
            numel *= int(extent)
        size = bucket(numel)
        wanted = torch.device(device)
        with self._lock:
            fits = [index for index, buffer in enumerate(self._free)  # sorted by size: the smallest that fits
                    if buffer.dtype == dtype and buffer.device == wanted and numel <= buffer.numel() <= 2 * size]
            buffer = self._free.pop(fits[0]) if fits else None
            if buffer is not None:
                self._bytes -= self._bytes_of(buffer)
                self.reused += 1
        if buffer is None:
            buffer = torch.empty(size, dtype=dtype, device=wanted)
            self.allocated += 1
        held.append(buffer)
        return buffer[:numel].view(*shape)

    def give(self, buffers: Sequence[torch.Tensor]) -> None:
        """Return buffers taken with :meth:`take`.  Over ``max_bytes``, the smallest idle ones go."""
        with self._lock:
            for buffer in buffers:
                if not any(buffer is idle for idle in self._free):
                    self._free.append(buffer)
                    self._bytes += self._bytes_of(buffer)
            self._free.sort(key=self._bytes_of)
            while self._free and self._bytes > self.max_bytes:
                self._bytes -= self._bytes_of(self._free.pop(0))

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._bytes = 0

    @property
    def idle_bytes(self) -> int:
        return self._bytes

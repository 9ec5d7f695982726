"""The GPU fast path for ``model.generate``: a static KV cache and a compiled decode step.

Why: with transformers' default dynamic cache every decode step re-allocates the cache and runs
the model eagerly, so a small model on a GPU is bound by Python and kernel launches (issue 25
measured 17.7 ms per step for a 0.5B model on an H100, 5.4 ms with a static cache and the compiled
step).  ``generate`` compiles the decode step itself when the cache is static and the device is
CUDA (``GenerationMixin._valid_auto_compile_criteria``); the compiled call is kept on the model,
so the compile is paid once per run as long as the shapes repeat.  This module makes them repeat:

- the cache length is bucketed (``max_cache_len`` rounded up to ``length_bucket`` tokens; transformers
  also keeps the largest length it has seen, so lengths only grow a few times per run);
- the batch is bucketed (the next power of two, capped at ``max_rows``, the caller's batch bound):
  the rows added are one-token prompts whose first sampled token is forced to EOS, and their
  outputs are dropped.

Why in the kit: the transformers backend (``static_cache``) and the local engine's sampler
(``engine_config.local.static_decode``) both plan their ``generate`` calls with it, and neither
plugin may depend on the other.  A caller that decodes some calls another way (rows continuing an
episode's kept dynamic cache, :mod:`~vista_plugin_decodekit.episode_cache`) counts them with
:meth:`StaticDecoder.fall_back`, so the stats say how often the static path did not run and why.

Qwen2.5-VL's M-RoPE works with a static cache: ``generate`` computes the 3-D position ids and the
rope deltas once at prefill (``_prepare_position_ids_for_generation``) and advances them per step
outside the model, so no cache length is read inside the compiled step (checked on transformers
5.17 and 5.24).  A model whose class does not declare ``_can_compile_fullgraph`` keeps the dynamic
cache.  On CPU the static cache is off by default (no compile there, and no gain); ``mode="on"``
forces it, which is how the tests check that greedy outputs equal the dynamic path's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

StaticMode = Literal["auto", "on", "off"]

#: Tensors with one row per prompt (padded with the extra rows); any other key must be an image key.
ROW_KEYS = ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids")
#: Tensors per image or video, not per row: the extra rows carry no images, so these stay as they are.
IMAGE_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts",
              "image_sizes")


def bucket_rows(rows: int, cap: int) -> int:
    """The batch size to run ``rows`` rows at: the next power of two, at most ``max(cap, rows)``."""
    size = 1
    while size < rows:
        size *= 2
    return max(rows, min(size, cap))


def bucket_length(tokens: int, step: int) -> int:
    """``tokens`` rounded up to a multiple of ``step`` (the static cache's length)."""
    return -(-tokens // step) * step


def supports_static_cache(model: Any) -> bool:
    """Whether the model's class says its forward compiles as one graph (transformers' own flag for
    the static-cache + compile path)."""
    return bool(getattr(model, "_can_compile_fullgraph", False))


class FinishPaddingRows:
    """A logits processor that makes rows ``first..`` emit EOS at once (so padding rows never keep
    ``generate`` running after the real rows have finished)."""

    def __init__(self, first: int, eos_id: int) -> None:
        self.first = first
        self.eos_id = eos_id

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if scores.shape[0] > self.first:
            scores[self.first:] = float("-inf")
            scores[self.first:, self.eos_id] = 0.0
        return scores


@dataclass
class StaticPlan:
    """What one ``generate`` call runs with: the (maybe padded) inputs, extra ``GenerationConfig``
    fields, extra logits processors (to put first), and how many leading rows are real."""

    inputs: Any
    config: dict[str, Any] = field(default_factory=dict)
    processors: list[Any] = field(default_factory=list)
    rows: int = 0


@dataclass
class StaticDecodeStats:
    """Calls that took the static path, calls that fell back (and the last reason), padding rows."""

    static_calls: int = 0
    dynamic_calls: int = 0
    padded_rows: int = 0
    fallback_reason: str | None = None
    #: rows of calls the caller ran on the dynamic path although the static one was on (:meth:`StaticDecoder.fall_back`)
    fallback_rows: int = 0


class StaticDecoder:
    """Plans each ``generate`` call of one model: static cache + compile where it pays, else as is.

    ``mode``: ``auto`` (static on CUDA when the model supports it), ``on`` (also on CPU; compiles
    only where ``compile`` says), ``off``.  ``compile``: ``None`` compiles on CUDA only (transformers'
    rule); ``True`` also on CPU (slow to compile, for tests); ``False`` never.
    """

    def __init__(self, mode: StaticMode = "auto", *, compile: bool | None = None, length_bucket: int = 256,
                 max_rows: int = 64) -> None:
        if mode not in ("auto", "on", "off"):
            raise ValueError(f"static cache mode must be 'auto', 'on' or 'off', not {mode!r}")
        self.mode: StaticMode = mode
        self.compile = compile
        self.length_bucket = length_bucket
        self.max_rows = max_rows
        self.stats = StaticDecodeStats()

    def active(self, model: Any, device: Any) -> tuple[bool, str | None]:
        """(use the static path, why not) for this model on this device."""
        if self.mode == "off":
            return False, "static cache turned off"
        if self.mode == "auto" and not str(device).startswith("cuda"):
            return False, f"device {device} is not CUDA (the static cache pays only with a compiled step)"
        if not supports_static_cache(model):
            return False, f"{type(model).__name__} does not declare _can_compile_fullgraph"
        return True, None

    def fall_back(self, rows: int, reason: str) -> None:
        """Count a call of ``rows`` rows that the caller runs on the dynamic path for its own
        ``reason`` (what :meth:`plan` counts for the reasons it knows)."""
        self.stats.dynamic_calls += 1
        self.stats.fallback_rows += rows
        self.stats.fallback_reason = reason

    def plan(self, model: Any, device: Any, inputs: Any, max_new_tokens: int, pad_id: int,
             eos_ids: list[int]) -> StaticPlan:
        """The plan for one call; ``inputs`` are the encoded, left-padded prompts (a ``BatchFeature``
        or a dict of tensors); ``device`` a name or a ``torch.device``."""
        rows = int(inputs["input_ids"].shape[0])
        use, why = self.active(model, device)
        if not use:
            self.stats.dynamic_calls += 1
            self.stats.fallback_reason = why
            return StaticPlan(inputs, rows=rows)
        from transformers import CompileConfig

        config: dict[str, Any] = {"cache_implementation": "static"}
        prompt = int(inputs["input_ids"].shape[1])
        config["max_cache_len"] = bucket_length(prompt + max_new_tokens, self.length_bucket)
        if self.compile is False:
            config["disable_compile"] = True
        elif self.compile or str(device).startswith("cuda"):  # None: transformers compiles on CUDA only
            compile_config = CompileConfig(fullgraph=False, dynamic=False)
            if self.compile:
                compile_config._compile_all_devices = True  # type: ignore[assignment]  # compile on any device
            config["compile_config"] = compile_config
        plan = StaticPlan(inputs, config, rows=rows)
        target = bucket_rows(rows, self.max_rows)
        if target > rows and eos_ids and set(inputs.keys()) <= set(ROW_KEYS) | set(IMAGE_KEYS):
            plan.inputs = pad_rows(inputs, target - rows, pad_id)
            plan.processors.append(FinishPaddingRows(rows, eos_ids[0]))
            self.stats.padded_rows += target - rows
        self.stats.static_calls += 1
        return plan


def pad_rows(inputs: Any, extra: int, pad_id: int) -> Any:
    """``inputs`` with ``extra`` more rows, each a one-token prompt (``pad_id``, attended at the last
    position only, left padding); image tensors are untouched (the new rows hold no image token)."""
    import torch

    out = inputs.copy() if hasattr(inputs, "copy") else dict(inputs)
    for key in ROW_KEYS:
        if key not in inputs:
            continue
        value = inputs[key]
        filler = torch.zeros((extra, value.shape[1]), dtype=value.dtype, device=value.device)
        if key == "input_ids":
            filler.fill_(pad_id)
        elif key == "attention_mask":
            filler[:, -1] = 1
        out[key] = torch.cat([value, filler], dim=0)
    return out

"""The static-cache decode path (issue 25, GPU fast path) gives the dynamic path's outputs.

On CUDA the backend decodes with a static KV cache and a compiled step; here on CPU the static
cache is forced (``static_cache="on"``) so the same cache, the same batch padding and the same
Qwen2.5-VL M-RoPE handling run, and greedy outputs must equal the dynamic cache's token for token.
The compile itself only runs on a GPU (``benchmarks/gpu_suite.sh`` measures it).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.static_decode import (
    FinishPaddingRows,
    StaticDecoder,
    bucket_length,
    bucket_rows,
    pad_rows,
)

from vista_rl import Message, SamplingParams


def chats() -> list[list[Message]]:
    """Two image chats of different sizes (different image token counts, so left padding and
    M-RoPE deltas differ per row) and a text-only one."""
    return [
        [Message("system", "Answer briefly."),
         Message("user", "<image> Which colour is the square?", [Image.new("RGB", (112, 84), (200, 30, 30))])],
        [Message("user", "Describe <image> in a few words, please, then answer.",
                 [Image.new("RGB", (56, 56), (10, 150, 40))])],
        [Message("user", "A text question with no image at all.")],
    ]


@pytest.fixture(scope="module")
def pair(backend: TransformersBackend) -> tuple[TransformersBackend, TransformersBackend]:
    """The session's dynamic backend and a static one over the same model objects."""
    static = TransformersBackend(model=backend.model, processor=backend.processor, device="cpu",
                                 static_cache="on", max_batch_size=8)
    dynamic = TransformersBackend(model=backend.model, processor=backend.processor, device="cpu",
                                  static_cache="off", max_batch_size=8)
    return static, dynamic


def test_greedy_static_equals_dynamic(pair: tuple[TransformersBackend, TransformersBackend]) -> None:
    static, dynamic = pair
    params = SamplingParams(temperature=0.0, max_tokens=12)
    fast = static.generate(chats(), params)
    slow = dynamic.generate(chats(), params)
    # the static cache was built (transformers records its length) at the bucketed length
    assert getattr(static.model, "_previous_max_cache_length", 0) % 256 == 0
    assert static.static_decode.stats.static_calls == 1 and dynamic.static_decode.stats.dynamic_calls == 1
    assert static.static_decode.stats.padded_rows == 1  # 3 rows ran as 4
    assert len(fast) == len(slow) == 3
    for ours, theirs in zip(fast, slow, strict=True):
        assert ours[0].token_ids == theirs[0].token_ids
        assert ours[0].text == theirs[0].text
        assert ours[0].prompt_token_ids == theirs[0].prompt_token_ids
        assert ours[0].finish_reason == theirs[0].finish_reason
        assert ours[0].logprobs == pytest.approx(theirs[0].logprobs, abs=1e-4)


def test_sampling_with_padding_rows_keeps_real_rows_only(pair: tuple[TransformersBackend, TransformersBackend]) -> None:
    static, _ = pair
    out = static.generate(chats()[:3], SamplingParams(temperature=1.0, max_tokens=6, n=2, seed=3))
    assert [len(samples) for samples in out] == [2, 2, 2]  # 6 rows ran as 8; the 2 extra are gone
    for samples in out:
        for generation in samples:
            assert 0 < len(generation.token_ids) <= 6
            assert len(generation.logprobs) == len(generation.token_ids)
            assert all(value <= 0.0 for value in generation.logprobs)


def test_auto_mode_keeps_the_dynamic_cache_on_cpu(backend: TransformersBackend) -> None:
    decoder = StaticDecoder("auto")
    use, why = decoder.active(backend.model, "cpu")
    assert not use and why is not None and "CUDA" in why
    assert decoder.active(backend.model, "cuda:0") == (True, None)


def test_model_without_fullgraph_support_falls_back() -> None:
    class Plain(torch.nn.Module):
        _can_compile_fullgraph = False

    use, why = StaticDecoder("on").active(Plain(), "cuda")
    assert not use and why is not None and "Plain" in why


def test_plan_buckets_lengths_and_rows() -> None:
    inputs: dict[str, Any] = {"input_ids": torch.tensor([[5, 6, 7], [0, 8, 9], [0, 0, 4]]),
                              "attention_mask": torch.tensor([[1, 1, 1], [0, 1, 1], [0, 0, 1]])}
    plan = StaticDecoder("on", compile=False, max_rows=64).plan(torch.nn.Linear(1, 1), "cpu", inputs, 300, 0, [2])
    assert plan.config == {}  # nn.Linear does not declare fullgraph support
    decoder = StaticDecoder("on", compile=False, length_bucket=128, max_rows=64)
    model = torch.nn.Linear(1, 1)
    model._can_compile_fullgraph = True  # type: ignore[assignment]
    plan = decoder.plan(model, "cpu", inputs, 300, 0, [2])
    assert plan.config["cache_implementation"] == "static"
    assert plan.config["max_cache_len"] == 384 and plan.config["disable_compile"] is True
    assert plan.rows == 3 and plan.inputs["input_ids"].shape == (4, 3)
    assert plan.inputs["attention_mask"][3].tolist() == [0, 0, 1]


def test_buckets() -> None:
    assert [bucket_rows(n, 64) for n in (1, 2, 3, 5, 33, 64)] == [1, 2, 4, 8, 64, 64]
    assert bucket_rows(100, 64) == 100 and bucket_rows(5, 6) == 6
    assert [bucket_length(n, 256) for n in (1, 256, 257)] == [256, 256, 512]


def test_padding_rows_emit_eos_first() -> None:
    scores = torch.zeros((4, 10))
    FinishPaddingRows(2, eos_id=7)(torch.zeros((4, 1), dtype=torch.long), scores)
    assert scores[:2].eq(0).all()
    assert scores[2:].argmax(-1).tolist() == [7, 7] and torch.isinf(scores[2:, :7]).all()


def test_pad_rows_adds_one_token_prompts() -> None:
    inputs = {"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 1]]),
              "pixel_values": torch.ones((4, 3))}
    out = pad_rows(inputs, 2, pad_id=9)
    assert out["input_ids"].tolist() == [[1, 2], [9, 9], [9, 9]]
    assert out["attention_mask"].tolist() == [[1, 1], [0, 1], [0, 1]]
    assert out["pixel_values"] is inputs["pixel_values"]


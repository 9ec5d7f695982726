"""VISTA plugin: the ``openai`` model backend for any OpenAI-compatible chat-completions server.

Import-light: httpx loads only when the backend is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_models(register: vista_rl.RegisterModel) -> None:
    register(
        "openai",
        "vista_plugin_openai.backend:OpenAIBackend",
        description="Any OpenAI-compatible /v1/chat/completions server (vLLM, vista serve, hosted APIs)",
    )

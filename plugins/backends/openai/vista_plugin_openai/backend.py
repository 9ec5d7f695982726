"""The ``openai`` model backend: any OpenAI-compatible ``/v1/chat/completions`` server (vLLM,
SGLang, ``vista serve``, hosted APIs).

Images travel as base64 ``data:`` URLs.  Requests run concurrently (bounded by
``max_concurrency``); connection errors, timeouts, 429 and 5xx answers are retried with exponential
backoff.  A request that still fails does not crash the batch: its samples come back as
``Generation(finish_reason="error")`` with the reason in ``metadata["error"]``, so a rollout records
the failure and goes on.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from vista_rl import Chat, Generation, ModelBackend, SamplingParams

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class RequestFailed(Exception):
    """A request failed for good (after retries, or with an answer that retrying cannot fix)."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


def chat_to_openai_messages(chat: Chat) -> list[dict[str, Any]]:
    """OpenAI ``messages``: plain strings for text-only messages, text and ``image_url`` parts (base64
    PNG data URLs, in placeholder order) where a message has images."""
    return [message.to_chat("openai") for message in chat]


class OpenAIBackend(ModelBackend):
    """Talks to an OpenAI-compatible server at ``path`` (or ``base_url``), e.g.
    ``http://127.0.0.1:8000/v1``.  ``model``: the served model's name (default: the first one the
    server lists at ``/v1/models``)."""

    def __init__(
        self,
        path: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_concurrency: int = 16,
        logprobs: bool = True,
        return_token_ids: bool = True,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        url = base_url or path or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise ValueError("openai backend needs the server's base URL: path= or base_url= "
                             "(e.g. http://127.0.0.1:8000/v1) or $OPENAI_BASE_URL")
        url = url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else f"{url}/v1"
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_concurrency = max(1, max_concurrency)
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=self.max_concurrency,
                                max_keepalive_connections=self.max_concurrency),
        )
        self._model = model
        self._model_lock = threading.Lock()

    # ------------------------------------------------------------------ HTTP with retries
    def _sleep_before_retry(self, attempt: int) -> None:
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        time.sleep(delay * (0.5 + random.random() / 2))  # jitter so retries from many threads spread out

    def _request(self, method: str, route: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.base_url}{route}"
        last_error = ""
        last_status: int | None = None
        for attempt in range(self.max_retries + 1):
            try:
                response = self._client.request(method, url, json=body)
            except httpx.TransportError as exc:  # refused, reset, dropped, timed out
                last_error, last_status = f"{type(exc).__name__}: {exc or 'connection failed'}", None
            else:
                if response.status_code < 400:
                    try:
                        data = response.json()
                    except ValueError:
                        raise RequestFailed(f"{url} answered {response.status_code} with non-JSON body: "
                                            f"{response.text[:200]!r}", response.status_code, attempt + 1) from None
                    return data if isinstance(data, dict) else {"data": data}
                last_status = response.status_code
                last_error = f"HTTP {response.status_code}: {_error_message(response)}"
                if response.status_code not in RETRYABLE_STATUS:
                    raise RequestFailed(f"{url} rejected the request: {last_error}", last_status, attempt + 1)
            if attempt < self.max_retries:
                self._sleep_before_retry(attempt)
        raise RequestFailed(f"{url} failed after {self.max_retries + 1} attempts: {last_error}",
                            last_status, self.max_retries + 1)

    @property
    def model(self) -> str:
        """The model name sent with each request (asked from ``/v1/models`` once when not given)."""
        with self._model_lock:
            if self._model is None:
                listed = self._request("GET", "/models").get("data") or []
                if not listed:
                    raise RequestFailed(f"{self.base_url}/models lists no models; pass model=NAME")
                self._model = str(listed[0]["id"])
            return self._model

    # ------------------------------------------------------------------ generation
    def _body(self, chat: Chat, params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_to_openai_messages(chat),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "n": params.n,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if self.logprobs:
            body["logprobs"] = True
        if self.return_token_ids:
            body["return_token_ids"] = True
        body.update(self.extra_body)
        return body

    def _one(self, chat: Chat, params: SamplingParams) -> list[Generation]:
        try:
            data = self._request("POST", "/chat/completions", self._body(chat, params))
            return _parse_choices(data, params.n)
        except RequestFailed as exc:
            return [_error_generation(str(exc), exc.status, exc.attempts) for _ in range(params.n)]
        except (KeyError, TypeError, ValueError) as exc:
            return [_error_generation(f"malformed response from {self.base_url}: {exc!r}", None, 1)
                    for _ in range(params.n)]

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        if not chats:
            return []
        try:
            _ = self.model
        except RequestFailed as exc:
            return [[_error_generation(str(exc), exc.status, exc.attempts) for _ in range(params.n)]
                    for _ in chats]
        workers = min(self.max_concurrency, len(chats))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vista-openai") as pool:
            return list(pool.map(lambda chat: self._one(chat, params), chats))

    def close(self) -> None:
        self._client.close()


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error", data.get("message", data))
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(error)
    return str(data)[:300]


def _error_generation(message: str, status: int | None, attempts: int) -> Generation:
    return Generation(text="", finish_reason="error",
                      metadata={"error": message, "status": status, "attempts": attempts})


def _parse_choices(data: dict[str, Any], n: int) -> list[Generation]:
    choices = sorted(data["choices"], key=lambda choice: choice.get("index", 0))
    if len(choices) != n:
        raise ValueError(f"asked for n={n} choices, got {len(choices)}")
    prompt_ids = data.get("prompt_token_ids")
    generations = []
    for choice in choices:
        message = choice.get("message") or {}
        content = message.get("content") or ""
        logprob_block = choice.get("logprobs") or {}
        entries = logprob_block.get("content") if isinstance(logprob_block, dict) else None
        logprobs = [float(entry["logprob"]) for entry in entries] if entries else None
        metadata: dict[str, Any] = {}
        if message.get("tool_calls"):
            metadata["tool_calls"] = message["tool_calls"]
        if data.get("usage"):
            metadata["usage"] = data["usage"]
        generations.append(Generation(
            text=str(content),
            token_ids=[int(token) for token in choice.get("token_ids") or []],
            logprobs=logprobs,
            prompt_token_ids=[int(token) for token in prompt_ids] if prompt_ids is not None else None,
            finish_reason=str(choice.get("finish_reason") or "stop"),
            metadata=metadata,
        ))
    return generations

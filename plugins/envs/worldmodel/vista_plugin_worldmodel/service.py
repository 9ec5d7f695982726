"""The judge model behind the LLM judges: batching, a cache, timeouts and retries.

Why a shared service: the rollout engine makes one env per episode and steps them concurrently on
its thread pool, so each env's judge request arrives alone.  Requests to the same judge model are
gathered here for ``batch_wait_s`` (or until ``batch_size`` are waiting) and sent as one batched
``generate`` call, which is what makes a judge affordable per rollout step (VAGEN batches its judge
calls in the env service for the same reason).  Identical prompts are answered from a bounded
cache.  A call that raises, returns an error or no usable reply, or exceeds ``timeout_s`` is retried
``retries`` times with exponential backoff; then the request fails with the reason recorded, and the
caller scores it 0.  Nothing here raises into a rollout.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import vista_rl
from vista_rl import Message, ModelBackend, SamplingParams


@dataclass
class Reply:
    """What the judge model said for one prompt (``text``), or why it said nothing (``error``)."""

    text: str | None = None
    error: str | None = None
    cached: bool = False
    attempts: int = 0


@dataclass
class ServiceStats:
    requests: int = 0
    cache_hits: int = 0
    generate_calls: int = 0
    failures: int = 0
    largest_batch: int = 0
    last_batch: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "generate_calls": self.generate_calls,
                "failures": self.failures, "largest_batch": self.largest_batch, "last_batch": self.last_batch}


#: A reply text -> whether it is usable (e.g. holds YES/NO); unusable replies are retried.
Validator = Callable[[str], bool]


class JudgeService:
    """One judge model, shared by every judge (and env) configured with it in this process."""

    def __init__(self, backend: ModelBackend, *, system_prompt: str | None = None, max_tokens: int = 400,
                 temperature: float = 0.1, timeout_s: float = 15.0, retries: int = 2, backoff_s: float = 0.5,
                 batch_size: int = 64, batch_wait_s: float = 0.05, cache_size: int = 10_000) -> None:
        self.backend = backend
        self.system_prompt = system_prompt
        self.sampling = SamplingParams(temperature=temperature, max_tokens=max_tokens, n=1, seed=0)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.batch_size = batch_size
        self.batch_wait_s = batch_wait_s
        self.cache_size = cache_size
        self.stats = ServiceStats()
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._pending: list[tuple[str, Validator, Future[Reply]]] = []
        self._collecting = False

    # ------------------------------------------------------------------ public
    def ask(self, prompts: Sequence[str], validate: Validator) -> list[Future[Reply]]:
        """Queue ``prompts`` and return at once; each future resolves to a :class:`Reply` (never to
        an exception).  The first request to find no batch forming starts a short-lived thread that
        waits ``batch_wait_s`` for more, then sends everything queued."""
        futures: list[Future[Reply]] = []
        with self._lock:
            for prompt in prompts:
                self.stats.requests += 1
                future: Future[Reply] = Future()
                cached = self._cache.get(prompt)
                if cached is not None:
                    self._cache.move_to_end(prompt)
                    self.stats.cache_hits += 1
                    future.set_result(Reply(text=cached, cached=True))
                else:
                    self._pending.append((prompt, validate, future))
                futures.append(future)
            self._arrived.notify_all()
            lead = bool(self._pending) and not self._collecting
            if lead:
                self._collecting = True
        if lead:  # gathers and sends on its own thread, so this caller can queue more before it waits
            threading.Thread(target=self._lead, daemon=True, name="vista-judge-batch").start()
        return futures

    def wait_s(self) -> float:
        """How long a caller may wait for a reply before calling it lost (all tries, backoff, batching)."""
        tries = self.retries + 1
        return tries * self.timeout_s + sum(self.backoff_s * 2**k for k in range(tries)) + self.batch_wait_s + 5.0

    # ----------------------------------------------------------------- batching
    def _lead(self) -> None:
        deadline = time.monotonic() + self.batch_wait_s
        with self._lock:
            while len(self._pending) < self.batch_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(left)
            batch, self._pending = self._pending, []
            self._collecting = False
        self._run(batch)

    def _run(self, batch: list[tuple[str, Validator, Future[Reply]]]) -> None:
        try:
            for start in range(0, len(batch), self.batch_size):
                self._run_chunk(batch[start:start + self.batch_size])
        except BaseException as exc:  # noqa: BLE001 - a bug here must still resolve every future
            for _, _, future in batch:
                if not future.done():
                    future.set_result(Reply(error=f"judge service failed: {type(exc).__name__}: {exc}"))

    def _run_chunk(self, chunk: list[tuple[str, Validator, Future[Reply]]]) -> None:
        waiting = list(chunk)
        errors: dict[int, str] = {}
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            outputs = self._generate([prompt for prompt, _, _ in waiting])
            still: list[tuple[str, Validator, Future[Reply]]] = []
            for item, output in zip(waiting, outputs, strict=True):
                prompt, validate, future = item
                if isinstance(output, str) and validate(output):
                    self._remember(prompt, output)
                    future.set_result(Reply(text=output, attempts=attempt + 1))
                else:
                    errors[id(future)] = (output.error or "no reply") if isinstance(output, Reply) else \
                        f"unusable judge reply: {str(output)[:200]!r}"
                    still.append(item)
            waiting = still
            if not waiting:
                return
        with self._lock:
            self.stats.failures += len(waiting)
        for _, _, future in waiting:
            future.set_result(Reply(error=errors.get(id(future), "no reply"), attempts=self.retries + 1))

    def _generate(self, prompts: list[str]) -> list[str | Reply]:
        """One batched call with a timeout: each prompt's reply text, or a Reply holding the error."""
        chats = [self._chat(prompt) for prompt in prompts]
        box: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                box["value"] = self.backend.generate(chats, self.sampling)
            except BaseException as exc:  # noqa: BLE001 - reported to the waiting caller
                box["error"] = exc
            finally:
                done.set()

        with self._lock:
            self.stats.generate_calls += 1
            self.stats.last_batch = len(prompts)
            self.stats.largest_batch = max(self.stats.largest_batch, len(prompts))
        threading.Thread(target=call, daemon=True, name="vista-judge-call").start()
        if not done.wait(self.timeout_s):
            return [Reply(error=f"judge model timed out after {self.timeout_s:g} s") for _ in prompts]
        if "error" in box:
            exc = box["error"]
            return [Reply(error=f"judge model raised {type(exc).__name__}: {exc}") for _ in prompts]
        return [_reply_text(box["value"], index) for index in range(len(prompts))]

    def _chat(self, prompt: str) -> list[Message]:
        chat = [Message("system", self.system_prompt)] if self.system_prompt else []
        return chat + [Message("user", vista_rl.escape_placeholders(prompt))]

    def _remember(self, prompt: str, text: str) -> None:
        if self.cache_size <= 0:
            return
        with self._lock:
            self._cache[prompt] = text
            self._cache.move_to_end(prompt)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)


def _reply_text(outputs: Any, index: int) -> str | Reply:
    try:
        samples = outputs[index]
        if isinstance(samples, BaseException):
            return Reply(error=f"judge model failed on this prompt: {type(samples).__name__}: {samples}")
        generation = samples[0]
    except (IndexError, KeyError, TypeError):
        return Reply(error=f"judge model returned no generation for prompt {index}")
    if isinstance(generation, str):
        return generation
    if getattr(generation, "finish_reason", "") == "error":
        metadata = getattr(generation, "metadata", {}) or {}
        return Reply(error=f"judge model error: {metadata.get('error', 'unknown')}")
    return str(getattr(generation, "text", generation))


# ------------------------------------------------------------------- sharing
_SERVICES: dict[str, JudgeService] = {}
_SERVICES_LOCK = threading.Lock()


def shared_service(backend: str | ModelBackend, backend_config: dict[str, Any] | None = None,
                   **settings: Any) -> JudgeService:
    """The process's service for this backend and settings (made on first use).  A backend given as
    an object is shared by identity; one given by id and config is made with ``vista_rl.make_model``
    once, so every env of a rollout step talks to the same batcher and cache."""
    if isinstance(backend, ModelBackend):
        key = f"object:{id(backend)}:{_digest(settings)}"
    else:
        key = f"{backend}:{_digest({'config': backend_config or {}, **settings})}"
    with _SERVICES_LOCK:
        service = _SERVICES.get(key)
        if service is None:
            model = backend if isinstance(backend, ModelBackend) else vista_rl.make_model(backend,
                                                                                            **(backend_config or {}))
            service = _SERVICES[key] = JudgeService(model, **settings)
        return service


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()[:16]

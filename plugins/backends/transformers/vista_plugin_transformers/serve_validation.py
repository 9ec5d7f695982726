"""What ``vista serve`` checks on one request before it may join a batch: plain functions over a
:class:`RequestRules` (the limits and what the backend can do), so each check is tested without a
server and a bad request fails alone with a 400 instead of taking the batch with it.

The body (how many JSON values it can hold, bounded from its bytes before parsing; nesting), the
fields (numbers finite and in range, ``max_tokens`` under the cap, ``n``, the number and length of
``stop`` strings), the images (pixels per image and per request, :mod:`vista_rl.limits`) and,
through the backend's ``check_prompt(chat)`` when it has one, the encoded prompt.  These functions
run on worker threads (60 MB of JSON held the event loop for 56 s), never on the event loop.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from vista_plugin_transformers.openai_messages import openai_messages_to_chat
from vista_plugin_transformers.openai_requests import ChatCompletionRequest, CompletionRequest
from vista_rl import Chat, ModelBackend, SamplingParams
from vista_rl.limits import (
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_IMAGES,
    DEFAULT_MAX_REQUEST_PIXELS,
    json_values_bound,
)
from vista_rl.serving import nesting_depth

MAX_JSON_DEPTH = 32
#: a text this many times the context length in characters cannot fit it (tokens average 3-5
#: characters; only runs of one repeated character reach 32), so it is refused before tokenizing:
#: tokenizing 60 MB of text took gigabytes
MAX_CHARS_PER_TOKEN = 32
RequestT = TypeVar("RequestT", ChatCompletionRequest, CompletionRequest)


class RequestRejected(Exception):
    """A request failed validation; ``status`` and ``message`` are what the client gets, ``large``
    whether its body was large (so the refusal gives the memory back too)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.large = False


@dataclass
class ServeLimits:
    """What one request may ask of ``vista serve`` (all configurable from the CLI).

    ``max_model_len``: context length (prompt + max_tokens); None takes the backend's.
    ``max_tokens_limit``: the largest ``max_tokens`` a request may ask for.
    ``max_json_values``: a bound (from the bytes, see :func:`vista_rl.limits.json_values_bound`)
    on the values one body may hold: 60 MB of tiny values parse into gigabytes of objects.
    ``max_stop_strings`` / ``max_stop_chars``: each stop string costs the generate thread work per
    vocabulary entry (300 strings of 300 characters took 7.8 s and stalled every other request).
    ``max_prompts``: text prompts one ``/v1/completions`` request may list (each is a generation).
    ``max_queued_rows``: generations (prompts x ``n``) that may wait for the generate thread; past
    it a request gets 503 with ``Retry-After: retry_after_s`` (an unbounded queue let six abandoned
    ``n=16`` streams delay every later request by a minute).
    """

    max_model_len: int | None = None
    max_tokens_limit: int = 4096
    max_n: int = 16
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_images: int = DEFAULT_MAX_IMAGES
    max_body_bytes: int = 64 * 1024 * 1024
    max_json_values: int = 1_000_000
    max_stop_strings: int = 16
    max_stop_chars: int = 256
    max_prompts: int = 16
    validation_threads: int = 4
    max_queued_rows: int = 1024
    retry_after_s: int = 2


@dataclass(frozen=True)
class RequestRules:
    """Everything a request is checked against: the server's limits and what its backend can do
    (read off the backend once, by :meth:`for_backend`)."""

    model_name: str
    limits: ServeLimits
    default_max_tokens: int = 256
    backend_name: str = "backend"
    max_model_len: int | None = None
    serves_text: bool = False
    serves_top_logprobs: bool = False
    #: the backend's ``check_prompt(chat) -> prompt tokens`` (raises ValueError for a bad prompt)
    check_prompt: Callable[[Chat], int] | None = None
    #: the backend's ``count_text_tokens(text) -> tokens``, for ``/v1/completions``
    count_text_tokens: Callable[[str], int] | None = None

    @classmethod
    def for_backend(cls, backend: ModelBackend, model_name: str, limits: ServeLimits,
                    default_max_tokens: int = 256) -> RequestRules:
        return cls(model_name, limits, default_max_tokens, type(backend).__name__,
                   max_model_len=limits.max_model_len or getattr(backend, "max_model_len", None),
                   serves_text=callable(getattr(backend, "generate_text", None)),
                   serves_top_logprobs="top_logprobs" in inspect.signature(backend.generate).parameters,
                   check_prompt=getattr(backend, "check_prompt", None),
                   count_text_tokens=getattr(backend, "count_text_tokens", None))


def load_json(raw: bytes, limits: ServeLimits) -> dict[str, Any]:
    """The body as a JSON object, refused (413) when its bytes could hold too many values, before
    parsing, and (400) when it is not JSON, nests too deeply or is not an object."""
    values = json_values_bound(raw)
    if values > limits.max_json_values:
        raise RequestRejected(413, f"the body may hold up to {values:,} JSON values, over this server's limit "
                                   f"of {limits.max_json_values:,}")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RequestRejected(400, f"the body is not valid JSON: {reason}") from None
    if nesting_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise RequestRejected(400, f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(body, dict):
        raise RequestRejected(400, "the body must be a JSON object")
    return body


def check_stop(stop: list[str], limits: ServeLimits) -> None:
    """Few, short, non-empty stop strings: each one costs the generate thread work per vocabulary entry."""
    if len(stop) > limits.max_stop_strings:
        raise RequestRejected(400, f"stop: {len(stop)} stop strings exceed this server's limit of "
                                   f"{limits.max_stop_strings}")
    for index, text in enumerate(stop):
        if not text:
            raise RequestRejected(400, f"stop[{index}]: a stop string must not be empty")
        if len(text) > limits.max_stop_chars:
            raise RequestRejected(400, f"stop[{index}]: a stop string of {len(text)} characters exceeds this "
                                       f"server's limit of {limits.max_stop_chars}")


def validated(rules: RequestRules, model: type[RequestT], raw: bytes) -> tuple[RequestT, SamplingParams]:
    """The body as ``model`` and its sampling parameters, with the checks every endpoint shares."""
    body = load_json(raw, rules.limits)
    try:
        request = model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}"
                             for err in exc.errors()[:5])
        raise RequestRejected(400, f"invalid request: {problems}") from None
    if request.model not in (None, rules.model_name):
        raise RequestRejected(404, f"model {request.model!r} is not served here; this server has {rules.model_name!r}")
    problem = request.problem()
    if problem:
        raise RequestRejected(400, problem)
    if request.top_logprobs_wanted and not rules.serves_top_logprobs:
        raise RequestRejected(400, f"this server's backend ({rules.backend_name}) does not return top_logprobs")
    cap = rules.limits.max_tokens_limit
    asked = request.asked_max_tokens
    if asked is not None and asked > cap:
        raise RequestRejected(400, f"max_tokens={asked} exceeds this server's limit of {cap} "
                                   "(vista serve --max-tokens-limit)")
    if request.n > rules.limits.max_n:
        raise RequestRejected(400, f"n={request.n} exceeds this server's limit of {rules.limits.max_n}")
    try:
        params = request.sampling_params(min(rules.default_max_tokens, cap))
    except ValidationError as exc:
        raise RequestRejected(400, str(exc)) from None
    check_stop(list(params.stop), rules.limits)
    return request, params


def check_characters(rules: RequestRules, characters: int, what: str) -> None:
    """Refuse a text that cannot fit the context, before tokenizing it."""
    if rules.max_model_len is not None and characters > rules.max_model_len * MAX_CHARS_PER_TOKEN:
        raise RequestRejected(400, f"the {what} hold {characters:,} characters, more than this model's maximum "
                                   f"context length of {rules.max_model_len} tokens can hold; shorten the {what}")


def check_length(rules: RequestRules, prompt_tokens: int, params: SamplingParams, what: str) -> None:
    """Prompt plus ``max_tokens`` within the context length."""
    limit = rules.max_model_len
    if limit is not None and prompt_tokens + params.max_tokens > limit:
        raise RequestRejected(
            400, f"this model's maximum context length is {limit} tokens, but {prompt_tokens + params.max_tokens} "
                 f"were requested ({prompt_tokens} in the {what}, {params.max_tokens} for the completion); "
                 f"shorten the {what} or lower max_tokens")


def parse_chat(rules: RequestRules, raw: bytes) -> tuple[ChatCompletionRequest, SamplingParams, Chat]:
    """Everything about one chat request that can be checked without the model's weights."""
    request, params = validated(rules, ChatCompletionRequest, raw)
    limits = rules.limits
    try:
        chat = openai_messages_to_chat(request.messages, max_image_pixels=limits.max_image_pixels,
                                       max_images=limits.max_images, max_request_pixels=limits.max_request_pixels)
    except ValueError as exc:
        raise RequestRejected(400, str(exc)) from None
    check_characters(rules, sum(len(message.content) for message in chat), "messages")
    prompt_tokens = 0
    if rules.check_prompt is not None:
        try:
            prompt_tokens = int(rules.check_prompt(chat))
        except ValueError as exc:
            raise RequestRejected(400, str(exc)) from None
    check_length(rules, prompt_tokens, params, "messages")
    return request, params, chat


def parse_completion(rules: RequestRules, raw: bytes) -> tuple[CompletionRequest, SamplingParams]:
    """One ``/v1/completions`` request: a backend that serves text, few prompts, each fitting the context."""
    request, params = validated(rules, CompletionRequest, raw)
    if not rules.serves_text:
        raise RequestRejected(400, f"this server's backend ({rules.backend_name}) serves chats only; "
                                   "use /v1/chat/completions")
    prompts = request.prompts
    if len(prompts) > rules.limits.max_prompts:
        raise RequestRejected(400, f"prompt: {len(prompts)} prompts exceed this server's limit of "
                                   f"{rules.limits.max_prompts} per request")
    for index, prompt in enumerate(prompts):
        what = "prompt" if len(prompts) == 1 else f"prompt[{index}]"
        check_characters(rules, len(prompt), what)
        if rules.count_text_tokens is not None:
            check_length(rules, int(rules.count_text_tokens(prompt)), params, what)
    return request, params

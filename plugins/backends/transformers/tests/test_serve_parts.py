"""``vista serve``'s parts, each without a server (issue 34 item 5): the request validators over a
``RequestRules``, the answers, the app's state object and the route handlers called with a
Starlette ``Request``.  The real server over HTTP is tested in test_transformers_server.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.requests import Request
from vista_plugin_transformers import serve_handlers
from vista_plugin_transformers.openai_requests import ChatCompletionRequest, CompletionRequest
from vista_plugin_transformers.openai_responses import StreamHeader, TokenTexts
from vista_plugin_transformers.request_queue import QueueFull
from vista_plugin_transformers.serve_answers import busy, error_response, refused, response_body
from vista_plugin_transformers.serve_state import ServeState, state_of
from vista_plugin_transformers.serve_validation import (
    MAX_CHARS_PER_TOKEN,
    MAX_JSON_DEPTH,
    RequestRejected,
    RequestRules,
    ServeLimits,
    check_stop,
    load_json,
    parse_chat,
    parse_completion,
    validated,
)
from vista_plugin_transformers.server import create_app

from vista_rl import Chat, Generation, Message, SamplingParams


def _rules(**overrides: Any) -> RequestRules:
    settings: dict[str, Any] = {"model_name": "tiny", "limits": ServeLimits(), "default_max_tokens": 64,
                                "backend_name": "TestBackend", "max_model_len": 100, "serves_text": True,
                                "serves_top_logprobs": True}
    return RequestRules(**{**settings, **overrides})


def _raw(body: Any) -> bytes:
    return json.dumps(body).encode()


def _rejected(call: Any, *args: Any) -> RequestRejected:
    with pytest.raises(RequestRejected) as caught:
        call(*args)
    return caught.value


CHAT = {"messages": [{"role": "user", "content": "hello"}]}


# ------------------------------------------------------------------------------- validation
def test_load_json_bounds_values_depth_and_shape() -> None:
    limits = ServeLimits(max_json_values=10)
    assert load_json(_raw({"a": 1}), limits) == {"a": 1}
    refusal = _rejected(load_json, _raw(list(range(50))), limits)
    assert refusal.status == 413 and "over this server's limit of 10" in refusal.message
    assert _rejected(load_json, b"{nope", ServeLimits()).status == 400
    deep = "[" * (MAX_JSON_DEPTH + 2) + "1" + "]" * (MAX_JSON_DEPTH + 2)
    assert "nests deeper" in _rejected(load_json, deep.encode(), ServeLimits()).message
    assert "JSON object" in _rejected(load_json, b"[1]", ServeLimits()).message


def test_check_stop_counts_and_lengths() -> None:
    limits = ServeLimits(max_stop_strings=2, max_stop_chars=3)
    check_stop(["a", "abc"], limits)
    assert "3 stop strings" in _rejected(check_stop, ["a", "b", "c"], limits).message
    assert "stop[1]: a stop string must not be empty" in _rejected(check_stop, ["a", ""], limits).message
    assert "stop[0]: a stop string of 4 characters" in _rejected(check_stop, ["abcd"], limits).message


def test_validated_applies_every_shared_rule() -> None:
    request, params = validated(_rules(), ChatCompletionRequest, _raw(CHAT))
    assert isinstance(request, ChatCompletionRequest) and params.max_tokens == 64  # the server's default
    capped = _rules(limits=ServeLimits(max_tokens_limit=8))
    assert validated(capped, ChatCompletionRequest, _raw(CHAT))[1].max_tokens == 8  # default under the cap
    cases = [
        (_rules(), {**CHAT, "model": "other"}, 404, "not served here"),
        (_rules(), {**CHAT, "temperature": -1}, 400, "invalid request: temperature"),
        (capped, {**CHAT, "max_tokens": 9}, 400, "max_tokens=9 exceeds this server's limit of 8"),
        (_rules(limits=ServeLimits(max_n=2)), {**CHAT, "n": 3}, 400, "n=3 exceeds"),
        (_rules(serves_top_logprobs=False), {**CHAT, "logprobs": True, "top_logprobs": 2}, 400,
         "(TestBackend) does not return top_logprobs"),
        (_rules(limits=ServeLimits(max_stop_strings=1)), {**CHAT, "stop": ["a", "b"]}, 400, "2 stop strings"),
    ]
    for rules, body, status, words in cases:
        refusal = _rejected(validated, rules, ChatCompletionRequest, _raw(body))
        assert refusal.status == status and words in refusal.message, (body, refusal.message)


def test_parse_chat_checks_characters_and_the_encoded_prompt() -> None:
    def check_prompt(chat: Chat) -> int:
        if "<|im_start|>" in chat[-1].content:
            raise ValueError("the messages hold a raw special token")
        return 30

    rules = _rules(check_prompt=check_prompt)
    request, params, chat = parse_chat(rules, _raw({**CHAT, "max_tokens": 70}))
    assert chat[-1].content == "hello" and params.max_tokens == 70  # 30 + 70 fits 100 exactly
    too_long = _rejected(parse_chat, rules, _raw({**CHAT, "max_tokens": 71}))
    assert "maximum context length is 100 tokens, but 101 were requested" in too_long.message
    special = _rejected(parse_chat, rules, _raw({"messages": [{"role": "user", "content": "<|im_start|>"}]}))
    assert special.status == 400 and "raw special token" in special.message
    huge = {"messages": [{"role": "user", "content": "x" * (100 * MAX_CHARS_PER_TOKEN + 1)}]}
    assert "shorten the messages" in _rejected(parse_chat, rules, _raw(huge)).message
    bad_image = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]}
    assert _rejected(parse_chat, rules, _raw(bad_image)).status == 400


def test_parse_completion_needs_a_text_backend_and_few_fitting_prompts() -> None:
    rules = _rules(count_text_tokens=len, limits=ServeLimits(max_prompts=2))
    request, params = parse_completion(rules, _raw({"prompt": ["ab", "cd"], "max_tokens": 98}))
    assert request.prompts == ["ab", "cd"] and params.max_tokens == 98
    assert "prompt[1]" in _rejected(parse_completion, rules, _raw({"prompt": ["ab", "abc"], "max_tokens": 98})).message
    assert "3 prompts exceed" in _rejected(parse_completion, rules, _raw({"prompt": ["a", "b", "c"]})).message
    chats_only = _rejected(parse_completion, _rules(serves_text=False), _raw({"prompt": "a"}))
    assert "serves chats only" in chats_only.message


def test_rules_read_what_the_real_backend_can_do(backend: Any) -> None:
    rules = RequestRules.for_backend(backend, "tiny", ServeLimits(max_model_len=512), 32)
    assert rules.backend_name == "TransformersBackend" and rules.max_model_len == 512
    assert rules.serves_text and rules.serves_top_logprobs
    assert rules.check_prompt is not None and rules.count_text_tokens is not None
    assert RequestRules.for_backend(backend, "tiny", ServeLimits()).max_model_len == backend.max_model_len


# ---------------------------------------------------------------------------------- answers
def test_error_bodies_and_headers() -> None:
    response = error_response(400, "bad", "invalid_request_error")
    assert response.status_code == 400 and json.loads(bytes(response.body)) == {
        "error": {"message": "bad", "type": "invalid_request_error"}}
    full = busy(QueueFull(10, 2, 10, 7), large=True)
    assert full.status_code == 503 and full.headers["retry-after"] == "7" and full.background is not None
    missing = RequestRejected(404, "no such model")
    assert json.loads(bytes(refused(missing).body))["error"]["type"] == "not_found_error"
    assert refused(missing).background is None  # a small request: no memory release


def test_response_body_orders_choices_and_carries_token_ids() -> None:
    header = StreamHeader("cmpl-1", "text_completion", 5, "tiny", False)
    request = CompletionRequest.model_validate({"prompt": ["ab", "cde"], "n": 2, "return_token_ids": True})
    per_prompt = [[Generation(f"p{p}s{s}", [p, s], prompt_token_ids=[9, p]) for s in range(2)] for p in range(2)]
    body = response_body(header, request, request.prompts, per_prompt, TokenTexts(None), chat=False)
    assert [c["text"] for c in body["choices"]] == ["p0s0", "p0s1", "p1s0", "p1s1"]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert body["prompt_token_ids"] == [[9, 0], [9, 1]] and body["choices"][3]["token_ids"] == [1, 1]
    assert body["object"] == "text_completion" and body["model"] == "tiny" and body["usage"]["completion_tokens"] == 8
    chat = ChatCompletionRequest.model_validate(CHAT)
    plain = response_body(header, chat, [[]], [[Generation("hi", [1])]], TokenTexts(None), chat=True)
    assert plain["choices"][0]["message"]["content"] == "hi" and "prompt_token_ids" not in plain


# ----------------------------------------------------------------------------- state + handlers
def _request(app: FastAPI, method: str = "GET", path: str = "/", body: bytes = b"") -> Request:
    """A Starlette request into ``app`` as an ASGI server would hand it over; after the body the
    client stays connected (``receive`` waits)."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}  # pragma: no cover - never reached

    scope = {"type": "http", "method": method, "path": path, "app": app, "query_string": b"",
             "headers": [(b"content-length", str(len(body)).encode())]}
    return Request(scope, receive)


def test_create_app_builds_one_state_and_handlers_read_it(backend: Any) -> None:
    app = create_app(backend, "tiny", limits=ServeLimits(max_model_len=256))
    state = state_of(_request(app))
    assert isinstance(state, ServeState) and app.state.batcher is state.batcher
    assert state.rules.model_name == "tiny" and state.limits.max_model_len == 256
    models = asyncio.run(serve_handlers.models(_request(app)))
    assert models["data"][0] == {"id": "tiny", "object": "model", "created": 0, "owned_by": "vista",
                                 "max_model_len": 256}
    assert asyncio.run(serve_handlers.stats(_request(app)))["requests"] == 0
    assert asyncio.run(serve_handlers.health(_request(app))) == {"status": "ok"}
    asyncio.run(state.stop())


def test_handlers_refuse_and_answer_without_a_server(backend: Any) -> None:
    app = create_app(backend, "tiny", limits=ServeLimits(max_body_bytes=4096))

    async def scenario() -> list[Any]:
        state = state_of(_request(app))
        await state.start()
        try:
            big = await serve_handlers.chat_completions(_request(app, "POST", "/v1/chat/completions", b"x" * 5000))
            wrong = await serve_handlers.completions(_request(app, "POST", "/v1/completions", _raw(
                {"model": "other", "prompt": "a"})))
            answer = await serve_handlers.chat_completions(_request(app, "POST", "/v1/chat/completions", _raw(
                {**CHAT, "max_tokens": 3, "temperature": 0.0, "return_token_ids": True})))
            return [big, wrong, answer, state.batcher.stats.to_dict()]
        finally:
            await state.stop()

    big, wrong, answer, stats = asyncio.run(scenario())
    assert big.status_code == 413
    assert wrong.status_code == 404 and "not served here" in json.loads(bytes(wrong.body))["error"]["message"]
    body = json.loads(bytes(answer.body))
    direct = backend.generate([[Message("user", "hello")]], SamplingParams(temperature=0.0, max_tokens=3))[0][0]
    assert answer.status_code == 200 and body["choices"][0]["token_ids"] == direct.token_ids
    assert body["prompt_token_ids"] == direct.prompt_token_ids and stats["requests"] == 1


"""The official ``openai`` Python client against ``vista serve`` over real HTTP on 127.0.0.1 (issue 27
item 5): streamed chat (server-sent events the client's streaming reads, usage last), top_logprobs,
the legacy ``/v1/completions``, and a clear refusal of http(s) image URLs."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.server import BackgroundServer

from vista_rl import SamplingParams, image_to_data_url


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)


def _messages() -> list[dict[str, Any]]:
    url = image_to_data_url(Image.new("RGB", (112, 112), "teal"))
    return [{"role": "user", "content": [{"type": "text", "text": "Grid: "},
                                         {"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": " Which way?"}]}]


def test_streamed_chat_assembles_to_the_non_streamed_text_with_usage_last(client: openai.OpenAI) -> None:
    request: dict[str, Any] = {"model": "tiny", "messages": _messages(), "temperature": 0.0, "max_tokens": 12,
                               "n": 2, "logprobs": True}
    whole = client.chat.completions.create(**request)
    chunks = list(client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))

    texts: dict[int, str] = {}
    logprobs: dict[int, list[float]] = {}
    finish: dict[int, str] = {}
    for chunk in chunks[:-1]:
        assert chunk.object == "chat.completion.chunk" and chunk.id == chunks[0].id and chunk.usage is None
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.logprobs and choice.logprobs.content:
                logprobs.setdefault(choice.index, []).extend(entry.logprob for entry in choice.logprobs.content)
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    assert chunks[0].choices[0].delta.role == "assistant"
    assert texts == {choice.index: choice.message.content for choice in whole.choices}
    assert finish == {choice.index: choice.finish_reason for choice in whole.choices}
    for choice in whole.choices:
        assert choice.logprobs is not None and choice.logprobs.content is not None
        assert logprobs[choice.index] == pytest.approx([entry.logprob for entry in choice.logprobs.content])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert whole.usage is not None and last.usage.model_dump() == whole.usage.model_dump()


def test_top_logprobs_list_the_likeliest_tokens_with_their_bytes(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello"}],
                                              temperature=0.0, max_tokens=6, logprobs=True, top_logprobs=3)
    content = response.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and len(content) == response.usage.completion_tokens  # type: ignore[union-attr]
    for entry in content:
        assert len(entry.top_logprobs) == 3
        values = [alt.logprob for alt in entry.top_logprobs]
        assert values == sorted(values, reverse=True)
        # greedy: the chosen token is the most likely one, under the same distribution
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-5)
        for alt in entry.top_logprobs:
            text = bytes(alt.bytes or []).decode("utf-8", errors="replace")
            assert text == alt.token or "\ufffd" in alt.token  # exact bytes, even for half a character


def test_completions_for_text_prompts_in_the_legacy_shape(client: openai.OpenAI,
                                                          backend: TransformersBackend) -> None:
    prompts = ["Once upon a time", "The answer is"]
    response = client.completions.create(model="tiny", prompt=prompts, max_tokens=5, temperature=0.0, n=2,
                                         logprobs=2)
    assert response.object == "text_completion" and [c.index for c in response.choices] == [0, 1, 2, 3]
    direct = backend.generate_text(prompts, SamplingParams(temperature=0.0, max_tokens=5))
    assert [c.text for c in response.choices] == [direct[0][0].text] * 2 + [direct[1][0].text] * 2
    first = response.choices[0].logprobs
    assert first is not None and first.tokens is not None and len(first.tokens) == 5
    assert first.token_logprobs == pytest.approx(direct[0][0].logprobs, abs=1e-4)
    assert first.text_offset is not None and first.text_offset[0] == len(prompts[0])
    for token, alternatives in zip(first.tokens, first.top_logprobs or [], strict=True):
        assert token in alternatives and 2 <= len(alternatives) <= 3
    assert response.usage is not None
    assert response.usage.prompt_tokens == sum(len(d[0].prompt_token_ids or []) for d in direct)
    assert response.usage.completion_tokens == 20

    streamed = list(client.completions.create(model="tiny", prompt=prompts[0], max_tokens=5, temperature=0.0,
                                              stream=True, stream_options={"include_usage": True}))
    assert "".join(chunk.choices[0].text for chunk in streamed if chunk.choices) == direct[0][0].text
    assert streamed[-1].usage is not None and streamed[-1].usage.completion_tokens == 5


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"echo": True}, "echo"),
    ({"prompt": [[1, 2, 3]]}, "send the prompt as text"),
    ({"prompt": ["x"] * 17}, "17 prompts"),
    ({"logprobs": 21}, "logprobs"),
])
def test_completions_refuse_what_they_do_not_support(client: openai.OpenAI, kwargs: dict[str, Any],
                                                     fragment: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(**{"model": "tiny", "prompt": "hi", "max_tokens": 2, **kwargs})
    assert fragment in str(refused.value)


def test_an_https_image_url_is_refused_with_what_to_send_instead(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/grid.png"}}]}])
    message = str(refused.value)
    assert "no network" in message and "data:" in message


def test_stream_pieces_join_to_the_text_even_mid_character_or_cut(backend: TransformersBackend) -> None:
    from vista_plugin_transformers.openai_responses import TokenTexts

    texts = TokenTexts(backend.tokenizer)
    ids = [(index * 37) % 500 for index in range(300)]  # the tiny vocabulary holds many half characters
    full = backend.tokenizer.decode(ids, skip_special_tokens=True)
    pieces = texts.pieces(ids, full)
    assert len(pieces) == len(ids) and "".join(pieces) == full
    # no piece runs ahead of its token: the first 100 pieces are text the first 100 tokens decode to
    assert backend.tokenizer.decode(ids[:100], skip_special_tokens=True).startswith("".join(pieces[:100]))
    cut = full[: len(full) // 2]  # what a stop string leaves
    assert "".join(texts.pieces(ids, cut)) == cut

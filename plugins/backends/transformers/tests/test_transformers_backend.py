"""The transformers backend on a tiny random Qwen2.5-VL: batching, sampling controls, logprobs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.chat import encode_chats

import vista_rl
from vista_rl import Message, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def _teacher_forced_logprobs(backend: TransformersBackend, chat: list[Message], token_ids: list[int],
                             temperature: float = 1.0) -> torch.Tensor:
    """Score ``token_ids`` after the chat's prompt with one forward pass (what a trainer computes)."""
    inputs = encode_chats(backend.processor, [chat])
    prompt_length = inputs["input_ids"].shape[1]
    inputs["input_ids"] = torch.cat([inputs["input_ids"], torch.tensor([token_ids])], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "mm_token_type_ids" in inputs:  # newer processors mark image tokens for the rope index
        inputs["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros((1, len(token_ids)), dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits = backend.model(**inputs).logits[0, prompt_length - 1:-1].float()
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, torch.tensor(token_ids).view(-1, 1)).squeeze(1)


def test_registered_and_made_through_vista(tiny_model_dir: Path) -> None:
    made = vista_rl.make_model("transformers", path=str(tiny_model_dir), device="cpu")
    assert isinstance(made, TransformersBackend)
    assert made.device == "cpu"


def test_batched_greedy_equals_one_at_a_time(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    chats = [image_chat(0), [Message("user", "no image here, a longer text prompt than the others")],
             image_chat(1, size=(224, 168), question="?")]
    batched = backend.generate(chats, GREEDY)
    for chat, outputs in zip(chats, batched, strict=True):
        alone = backend.generate([chat], GREEDY)[0][0]
        assert outputs[0].token_ids == alone.token_ids
        assert outputs[0].prompt_token_ids == alone.prompt_token_ids
        assert outputs[0].logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert len(outputs[0].token_ids) == 8 and outputs[0].finish_reason == "length"


def test_greedy_logprobs_match_a_teacher_forced_forward_pass(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    chat = image_chat(2)
    generation = backend.generate([chat], GREEDY)[0][0]
    expected = _teacher_forced_logprobs(backend, chat, generation.token_ids)
    assert generation.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
    prompt = encode_chats(backend.processor, [chat])["input_ids"][0].tolist()
    assert generation.prompt_token_ids == prompt


def test_sampled_logprobs_are_under_the_tempered_distribution(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    chat = image_chat(3)
    params = SamplingParams(temperature=0.5, max_tokens=6, seed=7)
    generation = backend.generate([chat], params)[0][0]
    tempered = _teacher_forced_logprobs(backend, chat, generation.token_ids, temperature=0.5)
    assert generation.logprobs == pytest.approx(tempered.tolist(), abs=1e-4)
    raw_backend = TransformersBackend(model=backend.model, processor=backend.processor, logprobs_mode="raw")
    raw = raw_backend.generate([chat], params)[0][0]
    assert raw.token_ids == generation.token_ids
    assert raw.logprobs == pytest.approx(_teacher_forced_logprobs(backend, chat, raw.token_ids).tolist(), abs=1e-4)
    nucleus = backend.generate([chat], params.model_copy(update={"top_p": 0.5}))[0][0]
    full = _teacher_forced_logprobs(backend, chat, nucleus.token_ids, temperature=0.5)
    assert all(got >= want - 1e-5 for got, want in zip(nucleus.logprobs or [], full.tolist(), strict=True))
    assert any(got > want + 1e-3 for got, want in zip(nucleus.logprobs or [], full.tolist(), strict=True))


def test_n_samples_and_seed(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    params = SamplingParams(temperature=1.0, max_tokens=10, n=3, seed=11)
    first = backend.generate([image_chat(4), image_chat(5)], params)
    assert [len(samples) for samples in first] == [3, 3]
    again = backend.generate([image_chat(4), image_chat(5)], params)
    assert [[g.token_ids for g in s] for s in first] == [[g.token_ids for g in s] for s in again]
    assert len({tuple(g.token_ids) for g in first[0]}) > 1
    other = backend.generate([image_chat(4), image_chat(5)], params.model_copy(update={"seed": 12}))
    assert [g.token_ids for g in other[0]] != [g.token_ids for g in first[0]]


def test_stop_strings_cut_text_and_ids(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    chat = image_chat(6)
    params = SamplingParams(temperature=1.0, max_tokens=16, seed=5)
    full = backend.generate([chat], params)[0][0]
    decode = backend.tokenizer.decode
    position, stop = next(
        (k, decode(full.token_ids[k:k + 1])) for k in range(2, len(full.token_ids))
        if decode(full.token_ids[k:k + 1]).strip() and decode(full.token_ids[k:k + 1]) not in decode(full.token_ids[:k])
        and decode(full.token_ids[:k]) + decode(full.token_ids[k:k + 1]) == decode(full.token_ids[:k + 1])
    )
    stopped = backend.generate([chat], params.model_copy(update={"stop": [stop]}))[0][0]
    assert stopped.text == decode(full.token_ids[:position], skip_special_tokens=True)
    assert stopped.finish_reason == "stop" and stopped.metadata["stop"] == stop
    assert stopped.token_ids == full.token_ids[:position + 1]
    assert stopped.logprobs == pytest.approx((full.logprobs or [])[:position + 1], abs=1e-5)


def test_eos_ends_a_generation_and_is_kept_in_the_ids(tiny_model_dir: Path, image_chat: Callable[..., list[Message]]) -> None:
    probe = TransformersBackend(path=str(tiny_model_dir), device="cpu")
    chat = image_chat(7)
    full = probe.generate([chat], GREEDY)[0][0]
    probe.model.generation_config.eos_token_id = full.token_ids[2]
    ended = probe.generate([chat, image_chat(8)], GREEDY)[0][0]
    cut = full.token_ids.index(full.token_ids[2]) + 1
    assert ended.token_ids == full.token_ids[:cut]
    assert ended.finish_reason == "stop"
    assert len(ended.logprobs or []) == cut


def test_live_model_object_keeps_its_training_mode(backend: TransformersBackend, image_chat: Callable[..., list[Message]]) -> None:
    live = TransformersBackend(model=backend.model, processor=backend.processor)
    backend.model.train()
    try:
        outputs = live.generate([image_chat(0)], GREEDY)[0][0]
        assert backend.model.training
    finally:
        backend.model.eval()
    assert outputs.token_ids == backend.generate([image_chat(0)], GREEDY)[0][0].token_ids
    assert live.device == "cpu"


def test_bad_construction_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="path=MODEL_DIR"):
        TransformersBackend()
    with pytest.raises(ValueError, match="processor"):
        TransformersBackend(model=torch.nn.Linear(1, 1))


def test_multi_image_message(backend: TransformersBackend) -> None:
    images = [Image.new("RGB", (112, 112), "red"), Image.new("RGB", (84, 56), "green")]
    chat = [Message("user", "<image> then <image>: same?", images)]
    generation = backend.generate([chat], GREEDY)[0][0]
    pad = backend.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert (generation.prompt_token_ids or []).count(pad) == 16 + 6

"""Incremental tokenisation (issue 36 item 2): a turn's prompt built from pieces tokenised once per
message equals the processor's encoding of the whole chat, at every turn of multi-turn episodes of
both VLM families, with images in later turns, a tool result carrying an image, and the context
windowed (``window_size`` 0, 2, none); and only each turn's new messages are tokenised."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.chat import encode_chats
from vista_plugin_transformers.prompt_ids import PromptEncoder

from vista_rl import Message

#: Replies with the shapes that split differently when tokenised apart: leading newline, spaces,
#: tags, a trailing space, an escaped placeholder.
REPLIES = ["\nUp", " <answer>Left</answer>  ", "<tool_call>{\"name\": \"zoom\", \"arguments\": {}}</tool_call>",
           "Right\n\n", "a <image > b", "Down"]


def windowed(history: list[Message], window_size: int | None) -> list[Message]:
    """The rollout's rule (``rollout.window_size``): the last k exchanges before the current message."""
    return list(history) if window_size is None else list(history[-(2 * window_size + 1):])


def episode_turns(seed: int, turns: int, window_size: int | None) -> Iterator[list[Message]]:
    """The chats of one episode, turn by turn, reusing the message objects as the rollout does:
    images in later turns (one of two sizes, two in one message), a tool message with an image."""
    system = Message("system", f"Play well (episode {seed}).")
    history = [Message("user", "Start: <image> where now?", [Image.new("RGB", (56, 56), (seed * 40 % 256, 10, 90))])]
    for turn in range(turns):
        yield [system, *windowed(history, window_size)]
        history.append(Message("assistant", REPLIES[(seed + turn) % len(REPLIES)]))
        colour = (turn * 30 % 256, seed * 50 % 256, 120)
        if turn % 3 == 0:  # a tool result with an image (the "tool" role)
            history.append(Message("tool", "<tool_response>\nzoom: here\n<image>\n</tool_response>",
                                   [Image.new("L", (84, 56), turn * 20 % 256)]))
        elif turn % 3 == 1:
            history.append(Message("user", "Two views: <image> and <image>.",
                                   [Image.new("RGB", (56, 84), colour), Image.new("RGB", (56, 56), colour)]))
        else:
            history.append(Message("user", f"Turn {turn}: no picture this time."))


@pytest.fixture(scope="module", params=["qwen2_5_vl", "internvl"])
def family_backend(request: pytest.FixtureRequest, tiny_model_dir: Path, tiny_internvl_dir: Path) -> TransformersBackend:
    path = tiny_model_dir if request.param == "qwen2_5_vl" else tiny_internvl_dir
    return TransformersBackend(path=str(path), device="cpu")


@pytest.mark.parametrize("window_size", [None, 0, 2])
def test_accumulated_ids_equal_a_full_render_at_every_turn(family_backend: TransformersBackend,
                                                           window_size: int | None) -> None:
    prompts = family_backend.prompts
    assert prompts is not None, "both families have a registered layout: pieces must be used"
    episodes = [episode_turns(seed, 6, window_size) for seed in range(3)]
    for turn, chats in enumerate(zip(*episodes, strict=True)):
        before = prompts.renderer.encoded
        ours = prompts.collate([prompts.render(chat) for chat in chats])
        reference = encode_chats(family_backend.processor, list(chats), padding_side="left")
        assert set(ours) == set(reference)
        for key, value in reference.items():
            assert torch.equal(ours[key], value), f"turn {turn}: {key} differs from the processor's encoding"
        if turn > 0:  # only the new message of each episode and its reply before it (unless windowed out)
            assert prompts.renderer.encoded - before == (1 if window_size == 0 else 2) * len(chats)


def test_backend_generates_from_pieces_after_checking_them(family_backend: TransformersBackend) -> None:
    chats = next(zip(*[episode_turns(seed, 1, None) for seed in range(2)], strict=True))
    from vista_rl import SamplingParams

    outputs = family_backend.generate(list(chats), SamplingParams(temperature=0.0, max_tokens=2))
    assert family_backend.prompts is not None and family_backend.prompts_fallback is None
    reference = encode_chats(family_backend.processor, list(chats), padding_side="left")
    for row, samples in enumerate(outputs):
        expected = reference["input_ids"][row][reference["attention_mask"][row].bool()].tolist()
        assert samples[0].prompt_token_ids == expected


def test_pieces_that_do_not_join_fall_back_to_whole_chats(tiny_model_dir: Path) -> None:
    """A tokenizer for which separately tokenised pieces differ from the whole text is caught on
    the first call and the backend encodes whole chats from then on (never a wrong prompt)."""
    backend = TransformersBackend(path=str(tiny_model_dir), device="cpu")
    assert backend.prompts is not None
    real = backend.prompts.text_ids
    backend.prompts.renderer._text_ids = lambda text: [*real(text), *real(" ")]  # a piece boundary that adds a token
    chat = [Message("system", "s"), Message("user", "hello")]
    from vista_rl import SamplingParams

    out = backend.generate([chat], SamplingParams(temperature=0.0, max_tokens=1))
    assert backend.prompts is None and "did not give the processor's encoding" in str(backend.prompts_fallback)
    expected = encode_chats(backend.processor, [chat])["input_ids"][0].tolist()
    assert out[0][0].prompt_token_ids == expected


def test_same_as_compares_every_tensor() -> None:
    base = {"input_ids": torch.tensor([[1, 2]]), "pixel_values": torch.zeros(2, 3)}
    assert PromptEncoder.same_as(dict(base), base)
    assert not PromptEncoder.same_as({**base, "pixel_values": torch.ones(2, 3)}, base)
    assert not PromptEncoder.same_as({"input_ids": base["input_ids"]}, base)


def test_images_of_a_known_grid_skip_the_processors_text_half(family_backend: TransformersBackend) -> None:
    """Issue 36 item 4: a new image whose processed grid was seen before runs the image processor
    alone; its span ids come from the first image of that grid (the ids stay the processor's: the
    test above compares them at every turn).  The whole processor runs once per grid here."""
    prompts = family_backend.prompts
    assert prompts is not None
    calls: list[int] = []
    whole = prompts.processor

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(whole, name)

        def __call__(self, *args: object, **kwargs: object) -> object:
            calls.append(1)
            return whole(*args, **kwargs)

    prompts.processor = Counting()
    try:
        for shade in range(6):  # six new pictures of one size, one of another
            size = (56, 56) if shade < 5 else (84, 56)
            image = Image.new("RGB", size, (shade * 40, 200 - shade * 30, 7))
            ids, encoded = prompts.image_ids(image)
            reference = family_backend.processor(text=[prompts.image_text], images=[image], return_tensors="pt")
            assert ids == reference["input_ids"][0].tolist()
            assert set(encoded.tensors) == {key for key in reference if key not in ("input_ids", "attention_mask",
                                                                                     "mm_token_type_ids")}
            for key, value in encoded.tensors.items():
                assert torch.equal(value, reference[key]), key
    finally:
        prompts.processor = whole
    assert len(calls) <= 2, f"the whole processor ran {len(calls)} times for two grids"


def test_text_ids_straight_from_the_rust_tokenizer_equal_the_tokenizers_own(family_backend: TransformersBackend) -> None:
    """Issue 36 item 4: a text piece is encoded by the ``tokenizers`` backend directly (the Python
    wrapper cost more than the encoding); the ids are the wrapper's, special tokens included, and a
    tokenizer left with truncation set goes back through the wrapper."""
    from vista_plugin_transformers.prompt_ids import _plain_rust_tokenizer

    prompts = family_backend.prompts
    assert prompts is not None
    tokenizer = prompts.tokenizer
    assert _plain_rust_tokenizer(tokenizer) is not None
    for text in ["", "\n", "hello  world ", "<|im_start|>user\nhi<|im_end|>\n", "a<|image_pad|>b", "émoji 🙂 ",
                 "<tool_call>{\"a\": 1}</tool_call>", "  \n\n x", "<image>"]:
        assert prompts.text_ids(text) == tokenizer(text, add_special_tokens=False)["input_ids"], text
    rust = tokenizer._tokenizer
    rust.enable_truncation(max_length=2)
    try:
        assert _plain_rust_tokenizer(tokenizer) is None
        assert prompts.text_ids("one two three four") == tokenizer("one two three four",
                                                                     add_special_tokens=False)["input_ids"]
    finally:
        rust.no_truncation()

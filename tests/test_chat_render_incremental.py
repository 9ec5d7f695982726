"""vista_rl.chat_render.IncrementalRenderer, torch-free: a chat's ids are its layout's ids (a
character-level tokenizer, for which any split joins exactly), each message is tokenised once while
it lives, text-only messages are shared by content, and a message's pieces go when it does.
(Real tokenizers of both VLM families: plugins/backends/transformers/tests/test_prompt_ids.py.)"""

from __future__ import annotations

import gc

from PIL import Image

from vista_rl import Message
from vista_rl.chat_render import IncrementalRenderer, chat_text
from vista_rl.model_family import ModelFamily

SPAN = "<V>"


class ChatML(ModelFamily):
    name = "chatml-test"


def char_ids(text: str) -> list[int]:
    return [ord(char) for char in text]


def image_ids(image: Image.Image) -> tuple[list[int], tuple[int, int]]:
    return char_ids(SPAN), image.size


def make_renderer(**kwargs: int) -> tuple[IncrementalRenderer[tuple[int, int]], list[str]]:
    calls: list[str] = []

    def text_ids(text: str) -> list[int]:
        calls.append(text)
        return char_ids(text)

    return IncrementalRenderer(ChatML(), text_ids, image_ids, **kwargs), calls


def test_ids_follow_the_layout_and_only_new_messages_are_tokenised() -> None:
    renderer, calls = make_renderer()
    family = ChatML()
    chat = [Message("system", "rules"), Message("user", "look <image> here", [Image.new("RGB", (3, 2))])]
    first = renderer.render(chat)
    assert first.ids == char_ids(chat_text(family, chat, image_text=SPAN)) and first.images == [(3, 2)]
    chat += [Message("assistant", "\nUp "), Message("tool", "<image><image>", [Image.new("L", (1, 1))] * 2)]
    calls.clear()
    second = renderer.render(chat)
    assert second.ids == char_ids(chat_text(family, chat, image_text=SPAN))
    assert second.images == [(3, 2), (1, 1), (1, 1)]
    # the reply (with its header), the separator, the tool message's text around its two images
    assert calls == [family.assistant_header + "\nUp " + family.end_token, family.message_separator,
                     "<|im_start|>user\n", "<|im_end|>\n"]
    assert renderer.encoded == 4 and renderer.reused == 2
    closed = renderer.render(chat[:3], add_generation_prompt=False)  # a chat ending with its reply
    assert closed.ids == char_ids(chat_text(family, chat[:3], add_generation_prompt=False, image_text=SPAN))


def test_text_only_messages_are_shared_by_content_within_the_bound() -> None:
    renderer, calls = make_renderer(text_cache_size=2)
    renderer.render([Message("system", "same"), Message("user", "a")])
    calls.clear()
    renderer.render([Message("system", "same"), Message("user", "a")])  # new objects, same contents
    assert calls == []
    renderer.render([Message("user", "b")])  # evicts the least recently used: the system prompt
    calls.clear()
    renderer.render([Message("user", "a")])
    assert calls == []
    renderer.render([Message("system", "same")])
    assert calls == ["<|im_start|>system\nsame<|im_end|>\n"]


def test_a_message_s_pieces_go_with_the_message() -> None:
    renderer, _ = make_renderer()
    message = Message("user", "<image>", [Image.new("RGB", (2, 2))])
    renderer.render([message])
    assert len(renderer._pieces) == 1
    del message
    gc.collect()
    assert renderer._pieces == {}


def test_a_changed_message_is_tokenised_again() -> None:
    renderer, _ = make_renderer()
    message = Message("user", "one")
    renderer.render([message])
    message.content = "two"
    assert renderer.render([message]).ids == char_ids(chat_text(ChatML(), [message]))

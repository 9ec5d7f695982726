"""Rendering vista chats to processor inputs: placeholders become image parts in order."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from vista_plugin_transformers.chat import (
    chat_images,
    chat_to_hf_messages,
    encode_chats,
    render_chat_text,
    vision_inputs,
)

from vista_rl import Message


def _two_image_chat() -> list[Message]:
    red, blue = Image.new("RGB", (112, 112), "red"), Image.new("L", (56, 84), 128)
    return [
        Message("system", "sys"),
        Message("user", "<image>left, <image> right", [red, blue]),
        Message("assistant", "<answer>Left</answer>"),
        Message("tool", "result"),
    ]


def test_messages_keep_image_positions_and_roles() -> None:
    messages = chat_to_hf_messages(_two_image_chat())
    assert messages[0] == {"role": "system", "content": "sys"}
    assert messages[1]["content"] == [{"type": "image"}, {"type": "text", "text": "left, "}, {"type": "image"},
                                      {"type": "text", "text": " right"}]
    assert messages[2] == {"role": "assistant", "content": "<answer>Left</answer>"}
    assert messages[3]["role"] == "tool"
    images = chat_images(_two_image_chat())
    assert [image.size for image in images] == [(112, 112), (56, 84)]
    assert all(image.mode == "RGB" for image in images)


def test_encode_chats_left_pads_and_expands_images(tiny_model_dir: Path) -> None:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    chats = [_two_image_chat(), [Message("user", "short")]]
    text = render_chat_text(processor, chats[0])
    assert text.count("<|vision_start|><|image_pad|><|vision_end|>") == 2
    assert text.endswith("<|im_start|>assistant\n")
    batch = encode_chats(processor, chats)
    pad_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((batch["input_ids"][0] == pad_id).sum()) == 16 + 6  # 112x112 -> 16, 56x84 -> 2x3
    assert batch["attention_mask"][1, 0] == 0 and batch["attention_mask"][1, -1] == 1  # left padding
    assert tuple(batch["image_grid_thw"].tolist()[1]) == (1, 6, 4)  # t, h, w in patches
    pixels = vision_inputs(processor, chat_images(chats[0]))
    assert pixels["pixel_values"].shape == batch["pixel_values"].shape
    assert vision_inputs(processor, []) == {}

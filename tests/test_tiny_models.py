"""The tiny-model factory: deterministic, complete, and loadable the way a hub checkpoint is."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="tiny models need vista-rl-sdk[models]")

from PIL import Image  # noqa: E402

from vista_rl_sdk.tiny_models import (  # noqa: E402
    FORMAT_TAGS,
    QWEN_SPECIAL_TOKENS,
    cached_tiny_model,
    init_tiny_model,
    iter_model_files,
)


def _file_bytes(model_dir: Path) -> dict[str, bytes]:
    return {str(path.relative_to(model_dir)): path.read_bytes() for path in iter_model_files(model_dir)}


def test_same_seed_gives_identical_files_and_other_seed_other_weights(tmp_path: Path,
                                                                      tiny_model_dir: Path) -> None:
    again = _file_bytes(init_tiny_model(tmp_path / "again", seed=0))
    assert again == _file_bytes(tiny_model_dir)
    other = _file_bytes(init_tiny_model(tmp_path / "other", seed=1))
    assert other["model.safetensors"] != again["model.safetensors"]
    assert other["tokenizer.json"] == again["tokenizer.json"]


def test_loads_with_auto_classes_and_ids_match_tokenizer(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    tokenizer = processor.tokenizer
    config = model.config
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert config.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert config.video_token_id == tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert config.vision_start_token_id == tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert config.text_config.eos_token_id == tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert config.text_config.vocab_size == len(tokenizer)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    for token in (*QWEN_SPECIAL_TOKENS, *FORMAT_TAGS):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token


def test_chat_template_places_images_and_roles(tiny_model_dir: Path) -> None:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    messages = [
        {"role": "system", "content": "Answer with Up, Down, Left or Right."},
        {"role": "user", "content": [{"type": "text", "text": "Grid:"}, {"type": "image"},
                                     {"type": "text", "text": "Move?"}]},
        {"role": "assistant", "content": "<think>wall</think><answer>Up</answer>"},
        {"role": "user", "content": "Again."},
    ]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nAnswer with Up, Down, Left or Right.<|im_end|>\n"
        "<|im_start|>user\nGrid:<|vision_start|><|image_pad|><|vision_end|>Move?<|im_end|>\n"
        "<|im_start|>assistant\n<think>wall</think><answer>Up</answer><|im_end|>\n"
        "<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n"
    )
    no_system = processor.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert no_system.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    inputs = processor(text=[text], images=[Image.new("RGB", (112, 112), "red")], return_tensors="pt")
    assert tuple(inputs["pixel_values"].shape) == (64, 1176)
    assert int((inputs["input_ids"] == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")).sum()) == 16


def test_generates_with_an_image(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which colour?"}]}],
        tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[Image.new("RGB", (140, 84), "blue")], return_tensors="pt")
    output = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    assert output.shape[1] == inputs["input_ids"].shape[1] + 6


def test_cached_model_is_built_once(tmp_path: Path) -> None:
    first = cached_tiny_model(seed=3, cache_dir=tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    second = cached_tiny_model(seed=3, cache_dir=tmp_path)
    assert first == second
    assert (second / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_unknown_architecture_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="qwen2_5_vl"):
        init_tiny_model(tmp_path, arch="llava-next")


def test_shape_options_reshape_the_model_and_let_a_28px_image_be_one_token(tmp_path: Path) -> None:
    import json

    from transformers import AutoConfig, AutoProcessor

    out = init_tiny_model(tmp_path / "shaped", seed=0, min_pixels=28 * 28, text={"num_hidden_layers": 3},
                          vision={"depth": 1, "fullatt_block_indexes": [0]})
    config = AutoConfig.from_pretrained(out)
    assert (config.text_config.num_hidden_layers, config.vision_config.depth) == (3, 1)
    processor = AutoProcessor.from_pretrained(out)
    small = processor(text=["<|vision_start|><|image_pad|><|vision_end|>"], images=[Image.new("RGB", (28, 28))],
                      return_tensors="pt")
    assert small["image_grid_thw"].tolist() == [[1, 2, 2]]  # 4 patches, merged 2x2 into one token
    assert int((small["input_ids"] == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")).sum()) == 1
    recipe = json.loads((out / "vista_tiny_model.json").read_text())
    assert recipe["min_pixels"] == 784 and recipe["text"] == {"num_hidden_layers": 3}
    with pytest.raises(ValueError, match="min_pixels"):
        init_tiny_model(tmp_path / "bad", min_pixels=100)


def test_internvl_is_deterministic_and_its_ids_match_the_tokenizer(tmp_path: Path, tiny_internvl_dir: Path) -> None:
    """The InternVL factory: same seed, same bytes; the config's image token is the processor's
    ``<IMG_CONTEXT>`` and one 28x28 tile is ``image_seq_length`` tokens."""
    from transformers import AutoConfig, AutoProcessor

    assert _file_bytes(init_tiny_model(tmp_path / "again", arch="internvl", seed=0)) == _file_bytes(tiny_internvl_dir)
    config = AutoConfig.from_pretrained(tiny_internvl_dir)
    processor = AutoProcessor.from_pretrained(tiny_internvl_dir)
    assert type(processor).__name__ == "InternVLProcessor"
    assert config.image_token_id == processor.image_token_id == processor.tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")
    assert config.text_config.eos_token_id == processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    inputs = processor(text=["<IMG_CONTEXT>"], images=[Image.new("RGB", (90, 50))], return_tensors="pt")
    assert tuple(inputs["pixel_values"].shape) == (1, 3, 28, 28)
    assert inputs["input_ids"][0].tolist().count(config.image_token_id) == config.image_seq_length == 1

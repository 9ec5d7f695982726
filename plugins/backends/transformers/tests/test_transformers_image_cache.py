"""Processed images cached per image (issue 28 item 4): turn k of a multi-turn chat does not run the
image processor again on earlier turns' images, and greedy outputs are identical with and without
the cache."""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from vista_rl import Message, SamplingParams


def _episode_chats(seed: int, turns: int) -> list[list[Message]]:
    """The chat of each turn of one episode: every turn adds a reply and a new observation image."""
    chat = [Message("system", "Answer with <answer>Up</answer> or another direction.")]
    chats = []
    for turn in range(turns):
        image = Image.new("RGB" if turn % 2 == 0 else "L", (56, 84), (seed * 40 + turn * 30) % 256
                          if turn % 2 else (seed * 40 % 256, turn * 50, 90))
        chat = [*chat, Message("user", f"Turn {turn}: <image> where now?", [image])]
        chats.append(chat)
        chat = [*chat, Message("assistant", f"<answer>{['Up', 'Left', 'Down'][(seed + turn) % 3]}</answer>")]
    return chats


def test_multi_turn_greedy_is_identical_with_and_without_the_image_cache(tiny_model_dir: Path) -> None:
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.chat import encode_chats

    cached = TransformersBackend(path=str(tiny_model_dir), device="cpu")
    plain = TransformersBackend(path=str(tiny_model_dir), device="cpu", image_cache_mb=0)
    assert plain.image_cache is None and cached.image_cache is not None
    episodes = [_episode_chats(seed, 3) for seed in range(3)]
    params = SamplingParams(temperature=0.0, max_tokens=6)
    for turn in range(3):
        chats = [episode[turn] for episode in episodes]
        assert ([g[0].token_ids for g in cached.generate(chats, params)]
                == [g[0].token_ids for g in plain.generate(chats, params)])
        ours, reference = encode_chats(cached._encoder, chats), encode_chats(plain.processor, chats)
        assert set(ours) == set(reference) and all(torch.equal(ours[key], reference[key]) for key in reference)
    cache = cached.image_cache
    # 9 distinct images, each processed once; every later sight of one is a hit: the backend's first
    # call checking its per-message pieces against a whole-chat encoding (3), the check above (3 x 1+2+3).
    # The backend's own later turns see no old image again: their messages' pieces are kept (prompt_ids).
    # One more: the first image of its grid goes through the whole processor after the image processor
    # alone (prompt_ids checks the two agree and keeps the grid's span ids; later images skip it).
    assert cache.enabled is True and cache.misses == 9 and cache.hits == 1 + 3 + 3 * (1 + 2 + 3)
    assert cached.timings.model_s > 0 and cached.timings.encode_s > 0 and cached.timings.calls == 3
    spent = cache.miss_seconds  # the real processor's time, on misses only: a hit adds none
    assert spent > 0
    cached.generate([episodes[0][2]], params)
    assert cache.misses == 9 and cache.miss_seconds == spent


def test_a_processor_whose_outputs_do_not_split_per_image_turns_the_cache_off(tiny_model_dir: Path) -> None:
    """A fake image processor (what a padded, per-batch output looks like; no such real processor is
    installed here): it pads every image's row to the batch's widest, so per-image outputs do not
    concatenate to the batched one; the cache notices on its first multi-image call."""
    from vista_plugin_transformers.image_cache import CachedImageProcessor

    def padded(images: list[Image.Image], **kwargs: object) -> dict[str, torch.Tensor]:
        width = max(image.width for image in images)
        return {"pixel_values": torch.stack([torch.arange(width, dtype=torch.float32) * (image.width <= width // 2)
                                             for image in images])}

    cache = CachedImageProcessor(padded)
    images = [Image.new("RGB", (4, 4)), Image.new("RGB", (8, 4))]
    out = cache(images)
    assert cache.enabled is False and torch.equal(out["pixel_values"], padded(images)["pixel_values"])
    assert torch.equal(cache(images)["pixel_values"], padded(images)["pixel_values"])

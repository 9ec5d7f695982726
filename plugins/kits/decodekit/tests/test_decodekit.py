"""The decoding kit's parts on their own: image spans, the reusable prefix, the positions of an
appended block (against the model's own ``get_rope_index`` over the whole prompt), and which models
are cached.  End to end (greedy replies equal a full re-prefill): the transformers plugin's
``tests/test_episode_cache.py`` and the local plugin's ``tests/test_cached_sampling.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from vista_plugin_decodekit import (
    EpisodeKVCache,
    ImageSpan,
    common_prefix_length,
    image_spans,
    reusable_prefix,
)
from vista_plugin_decodekit.positions import LinearPositions, MRopePositions, position_scheme

IMG = 9


def test_image_spans_pair_runs_with_keys() -> None:
    ids = [1, IMG, IMG, 2, IMG, 3, IMG, IMG, IMG]
    assert image_spans(ids, IMG, ["a", "b", "c"]) == [ImageSpan(1, 3, "a"), ImageSpan(4, 5, "b"), ImageSpan(6, 9, "c")]
    assert image_spans(ids, IMG, ["a", "b"]) is None  # runs and images do not pair up: not cached
    assert image_spans([1, 2], IMG, []) == []


def test_common_prefix_length_across_chunks() -> None:
    long = list(range(1000))
    assert common_prefix_length(long, long) == 1000
    assert common_prefix_length(long, [*long[:700], -1, *long[701:]]) == 700
    assert common_prefix_length(long, long[:300]) == 300
    assert common_prefix_length(long, long, limit=5) == 5


def test_reusable_prefix_stops_at_a_different_or_cut_image() -> None:
    cached = [1, 2, IMG, IMG, 3, 4, 5]
    spans = [ImageSpan(2, 4, "red")]
    prompt = [1, 2, IMG, IMG, 3, 4, 5, 6, 7]
    assert reusable_prefix(cached, spans, prompt, spans) == 7
    assert reusable_prefix(cached, spans, prompt, [ImageSpan(2, 4, "blue")]) == 2  # same ids, other picture
    assert reusable_prefix(cached, spans, cached, spans) == 6  # the last prompt token always runs
    cut = [1, 2, IMG, 8, 8]  # a cache whose image span is cut short by a difference inside it
    assert reusable_prefix(cut, [ImageSpan(2, 3, "red")], prompt, spans) == 2
    assert reusable_prefix([], [], prompt, spans) == 0


def test_mrope_positions_of_a_block_continue_the_whole_prompt(tiny_model_dir: Path) -> None:
    """Cut a prompt with two images of different grids anywhere outside an image: the block's
    positions (computed for the block alone and shifted) equal the whole prompt's ``get_rope_index``."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    scheme = MRopePositions(model)
    grids = [torch.tensor([[1, 4, 6]]), torch.tensor([[1, 8, 4]])]
    count = [int(grid.prod()) // 4 for grid in grids]
    ids = torch.tensor([105, 106, *[scheme.image_token_id] * count[0], 107, 108, 109, *[scheme.image_token_id] * count[1],
                        110, 111])
    kinds = (ids == scheme.image_token_id).long()
    full, _ = model.model.get_rope_index(ids.view(1, -1), mm_token_type_ids=kinds.view(1, -1),
                                         image_grid_thw=torch.cat(grids), attention_mask=None)
    full = full[:, 0]
    first_end, second_start = 2 + count[0], 5 + count[0]
    for start in (1, 2, first_end, first_end + 2, second_start, len(ids) - 1):
        images = [{"image_grid_thw": grid} for grid, begin in zip(grids, (2, second_start), strict=True)
                  if begin >= start]
        offset = int(full[:, :start].max()) + 1
        block = scheme.block(ids[start:], images, start, offset)
        assert torch.equal(block, full[:, start:]), f"cut at {start}"


def test_linear_positions_continue_at_the_prefix_length() -> None:
    assert LinearPositions().block(torch.zeros(3, dtype=torch.long), [], 5, 0).tolist() == [5, 6, 7]


def test_which_models_are_cached(tiny_model_dir: Path, tiny_internvl_dir: Path) -> None:
    from transformers import AutoModelForImageTextToText, Qwen2Config, Qwen2ForCausalLM

    assert isinstance(position_scheme(AutoModelForImageTextToText.from_pretrained(tiny_model_dir))[0], MRopePositions)
    assert isinstance(position_scheme(AutoModelForImageTextToText.from_pretrained(tiny_internvl_dir))[0],
                      LinearPositions)
    text_only = Qwen2ForCausalLM(Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, num_key_value_heads=1))
    cache = EpisodeKVCache(text_only)
    assert not cache.enabled and "model_type qwen2 is not known" in str(cache.why_not)
    off = EpisodeKVCache(AutoModelForImageTextToText.from_pretrained(tiny_model_dir), max_mb=0)
    assert not off.enabled and "0 MB" in str(off.why_not)


def test_end_frees_only_the_named_episodes(tiny_model_dir: Path) -> None:
    """A real one-row call planned, run by ``generate`` and kept; then ended."""
    from transformers import AutoModelForImageTextToText
    from vista_plugin_decodekit import RowPrompt

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    cache = EpisodeKVCache(model)
    batch = cache.plan([RowPrompt("a", [105, 106, 107], []), RowPrompt(None, [108, 109], [])], pad_id=0, device="cpu")
    assert batch.inputs["position_ids"].shape == (4, 2, 3) and batch.reused == 0
    with torch.no_grad():
        out = model.generate(**batch.inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    cache.keep(batch, out.sequences, eos_ids=[])
    assert cache.held("a") == 3 + 2 and cache.stats.entries == 1  # the prompt and the two replies fed back
    cache.end(["b"])
    assert cache.stats.entries == 1
    cache.end(["a"])
    assert cache.stats.entries == 0 and cache.stats.bytes == 0 and cache.stats.ended == 1


@pytest.mark.parametrize("cut", [1, 4])
def test_a_continued_row_reuses_its_prefix(tiny_model_dir: Path, cut: int) -> None:
    from transformers import AutoModelForImageTextToText
    from vista_plugin_decodekit import RowPrompt

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    cache = EpisodeKVCache(model)
    first = cache.plan([RowPrompt("a", [105, 106, 107, 108, 109], [])], pad_id=0, device="cpu")
    with torch.no_grad():
        out = model.generate(**first.inputs, max_new_tokens=2, do_sample=False, return_dict_in_generate=True)
    cache.keep(first, out.sequences, eos_ids=[])
    second = cache.plan([RowPrompt("a", [105, 106, 107, 108, 109][:cut] + [120, 121], []), RowPrompt("b", [103, 104], [])],
                        pad_id=0, device="cpu")
    assert second.reused == cut and second.width == cut + 2
    assert second.inputs["attention_mask"].tolist() == [[1] * (cut + 2), [0] * cut + [1, 1]]
    with torch.no_grad():
        continued = model.generate(**second.inputs, max_new_tokens=4, do_sample=False, return_dict_in_generate=True)
        alone = model.generate(input_ids=torch.tensor([[105, 106, 107, 108, 109][:cut] + [120, 121]]), max_new_tokens=4,
                               do_sample=False)
    assert continued.sequences[0, second.width:].tolist() == alone[0, cut + 2:].tolist()


def test_image_spans_match_a_plain_scan_on_long_runs() -> None:
    import random

    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.choice([1, 2, IMG, IMG, IMG]) for _ in range(rng.randint(0, 700))]
        runs, start = [], -1
        for position, token in enumerate([*ids, -1]):
            if token == IMG and start < 0:
                start = position
            elif token != IMG and start >= 0:
                runs.append((start, position))
                start = -1
        spans = image_spans(ids, IMG, ["k"] * len(runs))
        assert spans is not None and [(span.start, span.end) for span in spans] == runs


def test_a_preallocated_layer_writes_in_place_and_grows_when_it_must() -> None:
    from vista_plugin_decodekit.buffers import PreallocatedLayer

    layer = PreallocatedLayer(capacity=4)
    first = torch.arange(2 * 1 * 3 * 2, dtype=torch.float32).view(2, 1, 3, 2)
    keys, values = layer.update(first, -first)
    assert torch.equal(keys, first) and torch.equal(values, -first) and layer.get_seq_length() == 3
    buffer = layer.buffers()[0]
    keys, _ = layer.update(first[:, :, :1], first[:, :, :1])
    assert layer.buffers()[0] is buffer  # in place: no copy of the cache per step
    keys, _ = layer.update(first, first)  # 7 > 4 positions: grows, keeping what it held
    assert layer.get_seq_length() == 7 and torch.equal(keys[:, :, :3], first) and torch.equal(keys[:, :, 4:], first)
    layer.crop(-2)
    assert layer.update(first[:, :, :1], first[:, :, :1])[0].shape[-2] == 6  # a crop shortens what is filled

"""The staged buffers a call's layout reuses (issue 36 item 4): which buffer a request gets, that
one in use is never handed out twice, the idle bound, and, end to end on the tiny Qwen2.5-VL, that
a continued row laid out in reused buffers full of stale NaNs still decodes as the prompt alone."""

from __future__ import annotations

from pathlib import Path

import torch
from vista_plugin_decodekit import EpisodeKVCache, RowPrompt
from vista_plugin_decodekit.staging import StagingPool, bucket


def test_bucket_is_the_next_power_of_two() -> None:
    assert [bucket(n) for n in (0, 1, 2, 3, 5, 1024, 1025)] == [1, 1, 2, 4, 8, 1024, 2048]


def test_a_given_back_buffer_is_reused_for_a_request_that_fits() -> None:
    pool = StagingPool(max_bytes=1 << 20)
    held: list[torch.Tensor] = []
    first = pool.take((10, 10), torch.float32, "cpu", held)
    assert first.shape == (10, 10) and pool.allocated == 1 and held[0].numel() == 128
    pool.give(held)
    again: list[torch.Tensor] = []
    second = pool.take((11, 11), torch.float32, "cpu", again)  # 121 <= 128: the same buffer
    assert again[0] is held[0] and second.shape == (11, 11) and pool.reused == 1
    other: list[torch.Tensor] = []
    pool.take((10, 10), torch.float32, "cpu", other)  # the buffer is out: a new one, never a shared one
    assert other[0] is not again[0] and pool.allocated == 2
    pool.give(again + other)
    small: list[torch.Tensor] = []
    pool.take((4,), torch.float32, "cpu", small)  # 4 elements would waste a 128-element buffer
    assert all(small[0] is not buffer for buffer in again + other)
    wrong_dtype: list[torch.Tensor] = []
    pool.take((10, 10), torch.float64, "cpu", wrong_dtype)
    assert wrong_dtype[0].dtype == torch.float64 and wrong_dtype[0] is not again[0]


def test_idle_buffers_stay_under_the_bound_smallest_dropped_first() -> None:
    pool = StagingPool(max_bytes=4 * 1024)
    held: list[torch.Tensor] = []
    for elements in (256, 512, 1024):  # 1, 2 and 4 KB of float32
        pool.take((elements,), torch.float32, "cpu", held)
    pool.give(held)
    assert pool.idle_bytes == 4 * 1024  # only the largest fits next to nothing else
    kept: list[torch.Tensor] = []
    pool.take((1000,), torch.float32, "cpu", kept)
    assert kept[0] is held[2] and pool.idle_bytes == 0


def test_a_continued_row_in_stale_reused_buffers_decodes_as_the_prompt_alone(tiny_model_dir: Path) -> None:
    """Every buffer a call reuses is poisoned with NaN first: a position the layout forgot to write
    (masked padding included) would turn the reply into garbage."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    cache = EpisodeKVCache(model)
    prompt = [105, 106, 107, 108, 109, 110, 111]
    replies = []
    for turn in range(3):
        last = [list(prompt), [103, 104, *prompt[:turn]]]  # b: a shorter prefix, padded on the left
        rows = [RowPrompt("a", last[0], []), RowPrompt("b", last[1], [])]
        batch = cache.plan(rows, pad_id=0, device="cpu", max_new_tokens=3)
        with torch.no_grad():
            out = model.generate(**batch.inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True)
        cache.keep(batch, out.sequences, eos_ids=[])
        replies.append(out.sequences[:, batch.width:].tolist())
        prompt = [*prompt, *replies[-1][0], 112 + turn]
        for buffer in cache.staging._free:
            buffer.fill_(float("nan"))
    assert cache.staging.reused > 0, "later calls must lay out in the buffers earlier calls gave back"
    assert cache.stats.reused_rows >= 2
    for row, ids in enumerate(last):
        with torch.no_grad():
            alone = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=3, do_sample=False)
        assert replies[-1][row] == alone[0, len(ids):].tolist(), f"row {row}"


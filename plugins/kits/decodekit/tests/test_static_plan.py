"""The static-cache decode plan on its own (issue 25's GPU fast path, in the kit since issue 36 so
the transformers backend and the local engine share it): buckets, padding rows, when it applies,
and greedy ``generate`` on the tiny model with the plan equal to the dynamic cache's token for token
(forced on CPU: the same static cache and padding rows; the compile itself runs on a GPU only).
End to end through their callers: the transformers plugin's ``tests/test_static_decode.py`` and the
local plugin's ``tests/test_static_sampling.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from vista_plugin_decodekit.static_decode import (
    FinishPaddingRows,
    StaticDecoder,
    bucket_length,
    bucket_rows,
    pad_rows,
)


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path) -> Any:
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()


def test_greedy_generate_with_the_plan_equals_the_dynamic_cache(tiny_model: Any) -> None:
    """Three left-padded text prompts of different lengths, run as four rows on a static cache."""
    prompts = [[11, 12, 13, 14, 15], [21, 22, 23], [31]]
    width = max(len(prompt) for prompt in prompts)
    ids = torch.zeros((3, width), dtype=torch.long)
    mask = torch.zeros((3, width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    inputs = {"input_ids": ids, "attention_mask": mask}
    eos = 7
    decoder = StaticDecoder("on", max_rows=8)
    plan = decoder.plan(tiny_model, "cpu", inputs, 6, 0, [eos])
    assert plan.config["cache_implementation"] == "static" and plan.rows == 3
    assert plan.inputs["input_ids"].shape == (4, width) and decoder.stats.padded_rows == 1
    common = {"max_new_tokens": 6, "do_sample": False, "eos_token_id": eos, "pad_token_id": 0}
    with torch.no_grad():
        fast = tiny_model.generate(**plan.inputs, **common, **plan.config, logits_processor=plan.processors)
        slow = tiny_model.generate(**inputs, **common)
    assert fast[:plan.rows, width:].tolist() == slow[:, width:].tolist()
    assert fast[plan.rows:, width].tolist() == [eos]  # the padding row ended at once
    assert decoder.stats.static_calls == 1 and decoder.stats.dynamic_calls == 0


def test_auto_mode_keeps_the_dynamic_cache_on_cpu(tiny_model: Any) -> None:
    decoder = StaticDecoder("auto")
    use, why = decoder.active(tiny_model, "cpu")
    assert not use and why is not None and "CUDA" in why
    assert decoder.active(tiny_model, "cuda:0") == (True, None)
    assert decoder.active(tiny_model, torch.device("cuda")) == (True, None)
    assert StaticDecoder("off").active(tiny_model, "cuda") == (False, "static cache turned off")


def test_bad_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="'auto', 'on' or 'off'"):
        StaticDecoder("fast")  # type: ignore[arg-type]


def test_model_without_fullgraph_support_falls_back() -> None:
    class Plain(torch.nn.Module):
        _can_compile_fullgraph = False

    use, why = StaticDecoder("on").active(Plain(), "cuda")
    assert not use and why is not None and "Plain" in why


def test_plan_buckets_lengths_and_rows() -> None:
    inputs: dict[str, Any] = {"input_ids": torch.tensor([[5, 6, 7], [0, 8, 9], [0, 0, 4]]),
                              "attention_mask": torch.tensor([[1, 1, 1], [0, 1, 1], [0, 0, 1]])}
    plan = StaticDecoder("on", compile=False, max_rows=64).plan(torch.nn.Linear(1, 1), "cpu", inputs, 300, 0, [2])
    assert plan.config == {}  # nn.Linear does not declare fullgraph support
    decoder = StaticDecoder("on", compile=False, length_bucket=128, max_rows=64)
    model = torch.nn.Linear(1, 1)
    model._can_compile_fullgraph = True  # type: ignore[assignment]
    plan = decoder.plan(model, "cpu", inputs, 300, 0, [2])
    assert plan.config["cache_implementation"] == "static"
    assert plan.config["max_cache_len"] == 384 and plan.config["disable_compile"] is True
    assert plan.rows == 3 and plan.inputs["input_ids"].shape == (4, 3)
    assert plan.inputs["attention_mask"][3].tolist() == [0, 0, 1]
    # a key that is neither per row nor per image (explicit positions): no padding rows, still static
    positions = {**inputs, "position_ids": torch.zeros((3, 3, 3), dtype=torch.long)}
    plan = decoder.plan(model, "cpu", positions, 300, 0, [2])
    assert plan.rows == 3 and plan.inputs is positions and not plan.processors


def test_fall_back_counts_the_callers_dynamic_calls() -> None:
    decoder = StaticDecoder("on")
    decoder.fall_back(5, "rows continue a kept cache")
    stats = decoder.stats
    assert (stats.dynamic_calls, stats.fallback_rows, stats.fallback_reason) == (1, 5, "rows continue a kept cache")


def test_buckets() -> None:
    assert [bucket_rows(n, 64) for n in (1, 2, 3, 5, 33, 64)] == [1, 2, 4, 8, 64, 64]
    assert bucket_rows(100, 64) == 100 and bucket_rows(5, 6) == 6
    assert [bucket_length(n, 256) for n in (1, 256, 257)] == [256, 256, 512]


def test_padding_rows_emit_eos_first() -> None:
    scores = torch.zeros((4, 10))
    FinishPaddingRows(2, eos_id=7)(torch.zeros((4, 1), dtype=torch.long), scores)
    assert scores[:2].eq(0).all()
    assert scores[2:].argmax(-1).tolist() == [7, 7] and torch.isinf(scores[2:, :7]).all()


def test_pad_rows_adds_one_token_prompts() -> None:
    inputs = {"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 1]]),
              "pixel_values": torch.ones((4, 3))}
    out = pad_rows(inputs, 2, pad_id=9)
    assert out["input_ids"].tolist() == [[1, 2], [9, 9], [9, 9]]
    assert out["attention_mask"].tolist() == [[1, 1], [0, 1], [0, 1]]
    assert out["pixel_values"] is inputs["pixel_values"]

"""verl 0.9.1's mini-batch split of equal-length M-RoPE rows, reproduced as verl builds the batch, and
our patch (``vista_plugin_verl.patches``, installed by the plugin's ``verl.plugins`` entry point).

The batch is built as it reaches ``train_mini_batch``: per-row ``(4, L)`` position ids (Qwen2.5-VL:
text + 3 M-RoPE rows) packed by TransferQueue's own ``_pack_field_values``, then verl's
``maybe_fix_3d_position_ids`` and ``make_iterator`` (whose ``index_select_tensor_dict`` unbinds), as
``verl/workers/engine_workers.py:252-280`` runs them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

pytest.importorskip("verl.utils.tensordict_utils")
storage = pytest.importorskip("transfer_queue.storage.managers.simple_storage_manager")

from tensordict import TensorDict  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from vista_plugin_verl import patches  # noqa: E402

pack = storage.AsyncSimpleStorageManager._pack_field_values
EQUAL = [67, 67, 67, 67]


def mrope_row(index: int, length: int) -> torch.Tensor:
    """(4, L) position ids as verl's agent loop computes them: a text row, then 3 M-RoPE rows."""
    text = torch.arange(length)
    return torch.stack([text, text + index, text // 2, text // 3])


def batch(lengths: list[int]) -> TensorDict:
    """The rows as TransferQueue hands them to the actor update (row i's input ids start at 1000 i)."""
    ids = [torch.arange(length) + 1000 * index for index, length in enumerate(lengths)]
    rows = [mrope_row(index, length) for index, length in enumerate(lengths)]
    return TensorDict({"input_ids": pack(ids), "position_ids": pack(rows)}, batch_size=len(lengths))


def split(data: TensorDict, fix: Callable[[Any], None], mini_batch: int) -> list[TensorDict]:
    """What train_mini_batch does before the forward: the fix, then the mini-batch iterator."""
    fix(data)
    return list(tu.make_iterator(data, mini_batch_size=mini_batch, epochs=1, seed=0))


def test_verls_own_path_fails_on_equal_length_rows() -> None:
    original = patches._ORIGINAL.get("maybe_fix_3d_position_ids", tu.maybe_fix_3d_position_ids)
    assert original is not patches.fix_3d_position_ids
    packed = batch(EQUAL)["position_ids"]
    assert packed.is_nested and packed._ragged_idx == 1  # equal rows: torch packs them ragged on dim 1
    with pytest.raises(RuntimeError, match=r"split_with_sizes expects split_sizes to sum exactly to 67.*\[4, 4, 4, 4\]"):
        split(batch(EQUAL), original, mini_batch=2)


@pytest.mark.parametrize("lengths", [EQUAL, [67, 66, 70, 67], [5, 5]])
def test_the_patched_fix_gives_each_row_its_own_position_ids(lengths: list[int]) -> None:
    patches.install()
    assert tu.maybe_fix_3d_position_ids is patches.fix_3d_position_ids
    minis = split(batch(lengths), tu.maybe_fix_3d_position_ids, mini_batch=2)
    seen = []
    for mini in minis:
        for ids, positions in zip(mini["input_ids"].unbind(), mini["position_ids"].unbind(), strict=True):
            index = int(ids[0]) // 1000
            torch.testing.assert_close(positions, mrope_row(index, lengths[index]))
            seen.append(index)
        # what the FSDP engine reads (transformer_impl.py:1193): values() of shape (4, the mini-batch's tokens)
        assert mini["position_ids"].values().shape == (4, int(mini["input_ids"].offsets()[-1]))
    assert sorted(seen) == list(range(len(lengths)))


def test_a_micro_batch_without_images_runs_through_the_qwen_vl_forward() -> None:
    """verl's text-only branch of Qwen2-VL's input embeddings with transformers 5's vision output
    (a BaseModelOutputWithPooling): AttributeError in verl, the dummy image's 0-weighted embedding here."""
    from transformers import AutoModelForImageTextToText
    from verl.models.transformers import qwen2_vl

    from vista_rl_sdk.tiny_models import cached_tiny_model

    model = AutoModelForImageTextToText.from_pretrained(cached_tiny_model()).model
    ids = torch.tensor([[1, 2, 3, 4]])
    original = patches._ORIGINAL["qwen2_vl._get_input_embeds"]
    with pytest.raises(AttributeError, match="'BaseModelOutputWithPooling' object has no attribute 'mean'"):
        original(model, ids)
    assert getattr(qwen2_vl._get_input_embeds, "vista_patched", False)  # installed on `import verl`
    embeds, _mask = qwen2_vl._get_input_embeds(model, ids)
    torch.testing.assert_close(embeds, model.get_input_embeddings()(ids))
    embeds.sum().backward()
    assert any(p.grad is not None for p in model.visual.parameters())  # the tower is in the graph, as verl wants

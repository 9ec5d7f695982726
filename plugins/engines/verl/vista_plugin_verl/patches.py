"""Narrow, named patches of verl 0.9.x, each for one bug we hit, each tested (tests/verl/test_verl_patches.py).

``qwen2_vl_text_only_micro_batch``: see :func:`text_only_input_embeds`.

``mrope_equal_lengths``: Qwen2-VL/2.5-VL rows carry 4-row position ids (text + 3 M-RoPE rows, shape
``(4, L)`` per row, ``verl/experimental/agent_loop/agent_loop.py:920-965``).  verl's engine expects them
as one jagged tensor ragged on the last dim (``values()`` of shape ``(4, sum L)``,
``verl/workers/engine/fsdp/transformer_impl.py:1193-1194``).  TransferQueue hands a batch back packed
by ``torch.nested.as_nested_tensor(rows, layout=torch.jagged)``
(``transfer_queue/storage/managers/simple_storage_manager.py:574``); when every row of the batch has
the same length ``L`` (one-turn envs, per-turn rows of a fixed-size observation: common) torch makes it
ragged on dim 1 instead, values ``(4B, L)``.  verl's own workaround, ``maybe_fix_3d_position_ids``
(``verl/utils/tensordict_utils.py:910-915``, called first thing in ``train_mini_batch``,
``verl/workers/engine_workers.py:252``), then relabels it ragged on dim 2 without moving the data,
and the mini-batch split fails in ``index_select_tensor_dict``'s ``unbind``
(``split_with_sizes expects split_sizes to sum exactly to L ... got [4, 4, 4, 4]``).  The patched
function rebuilds such a tensor from its rows (lengths from ``input_ids``), ragged on dim 2, before
verl's relabelling; every other tensor goes to verl's function unchanged.

``vllm_dummy_load_keeps_buffers``: see :func:`keep_constructed_buffers`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: verl versions the patches were written against (a newer verl may have fixed them: not patched)
VERL_SERIES = "0.9."
#: modules that bind ``maybe_fix_3d_position_ids`` by name at import
_USERS = ("verl.workers.engine_workers", "verl.workers.engine.base", "verl.workers.engine_workers_tinker")
_ORIGINAL: dict[str, Callable[..., Any]] = {}


def rows_of_position_ids(position_ids: Any, lengths: list[int]) -> list[Any] | None:
    """Each row's ``(k, L_i)`` position ids from a 3-D jagged tensor however it is laid out: ragged on
    the last dim (values ``(k, sum L)``) or, all rows equal, on dim 1 (values ``(B k, L)``).  None
    where neither layout fits the lengths."""
    values = position_ids.values()
    batch = len(lengths)
    if values.dim() != 2 or not batch:
        return None
    if values.shape[1] == sum(lengths) and getattr(position_ids, "_ragged_idx", 2) == 2:
        return list(values.split(lengths, dim=1))
    if len(set(lengths)) == 1 and values.shape[1] == lengths[0] and values.shape[0] % batch == 0:
        return list(values.reshape(batch, values.shape[0] // batch, lengths[0]).unbind(0))
    return None


def fix_3d_position_ids(data: Any) -> None:
    """verl's ``maybe_fix_3d_position_ids`` that also repairs a batch of equal-length M-RoPE rows."""
    from verl.utils.tensordict_utils import nested_tensor_from_tensor_list

    keys = data.keys()
    if "position_ids" in keys and "input_ids" in keys:
        ids, positions = data["input_ids"], data["position_ids"]
        if positions.is_nested and positions.dim() == 3 and getattr(positions, "_ragged_idx", 2) == 1 and ids.is_nested:
            lengths = [int(length) for length in ids.offsets().diff().tolist()]
            rows = rows_of_position_ids(positions, lengths)
            if rows is not None:
                data["position_ids"] = nested_tensor_from_tensor_list([row.contiguous() for row in rows], ragged_idx=2)
    _ORIGINAL["maybe_fix_3d_position_ids"](data)


def install() -> list[str]:
    """Apply the patches to verl 0.9.x (idempotent); returns the names of those applied.  The vLLM
    patch goes in whatever verl's version (it is about the dummy load verl asks every vLLM for)."""
    import verl
    import verl.utils.tensordict_utils as tensordict_utils

    vllm_applied = ["vllm_dummy_load_keeps_buffers"] if install_vllm_dummy_load_patch() else []
    version = str(getattr(verl, "__version__", ""))
    if not version.startswith(VERL_SERIES):
        logger.info("vista-plugin-verl: verl %s is not %sx, its patches are not applied", version, VERL_SERIES)
        return vllm_applied
    current = tensordict_utils.maybe_fix_3d_position_ids
    if current is not fix_3d_position_ids:
        _ORIGINAL.setdefault("maybe_fix_3d_position_ids", current)
        tensordict_utils.maybe_fix_3d_position_ids = fix_3d_position_ids  # type: ignore[assignment]
    for name in _USERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "maybe_fix_3d_position_ids", None) is not fix_3d_position_ids:
            module.maybe_fix_3d_position_ids = fix_3d_position_ids  # type: ignore[attr-defined]
    applied = ["mrope_equal_lengths", *vllm_applied]
    if _install_text_only_input_embeds():
        applied.append("qwen2_vl_text_only_micro_batch")
    return applied


def text_only_input_embeds(original: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``qwen2_vl._get_input_embeds`` for a micro-batch without any image or video.

    verl runs the vision tower on a dummy image then, so every parameter gets a gradient, and adds
    ``0.0 * image_embeds.mean()`` (``verl/models/transformers/qwen2_vl.py:388-393``); but
    transformers 5's vision tower returns a ``BaseModelOutputWithPooling``, which verl unpacks
    (``verl.utils.transformers_compat.unpack_visual_output``) everywhere except there:
    ``AttributeError: 'BaseModelOutputWithPooling' object has no attribute 'mean'``.  Per-turn rows make
    such micro-batches common (a turn whose context is text only).  Here that branch unpacks it;
    batches with images go to verl's function unchanged."""
    import functools

    import torch
    from verl.utils.transformers_compat import unpack_visual_output

    @functools.wraps(original)
    def get_input_embeds(model: Any, input_ids: Any, attention_mask: Any = None, pixel_values: Any = None,
                         pixel_values_videos: Any = None, image_grid_thw: Any = None,
                         video_grid_thw: Any = None) -> Any:
        if pixel_values is not None or pixel_values_videos is not None:
            return original(model, input_ids, attention_mask, pixel_values, pixel_values_videos, image_grid_thw,
                            video_grid_thw)
        inputs_embeds = model.get_input_embeddings()(input_ids)
        config = model.config.vision_config
        patch_dim = config.in_channels * config.temporal_patch_size * config.patch_size**2
        dummy = torch.zeros((16, patch_dim), dtype=inputs_embeds.dtype, device=inputs_embeds.device)
        grid = torch.tensor([[1, 4, 4]], dtype=torch.long, device=inputs_embeds.device)
        image_embeds, _ = unpack_visual_output(model.visual(dummy, grid_thw=grid))
        inputs_embeds = inputs_embeds + 0.0 * image_embeds.mean()
        if attention_mask is not None:
            attention_mask = attention_mask.to(inputs_embeds.device)
        return inputs_embeds, attention_mask

    get_input_embeds.vista_patched = True  # type: ignore[attr-defined]
    return get_input_embeds


def _install_text_only_input_embeds() -> bool:
    try:
        import verl.models.transformers.qwen2_vl as qwen2_vl
    except ImportError:  # pragma: no cover - verl without its transformers models
        return False
    if not getattr(qwen2_vl._get_input_embeds, "vista_patched", False):
        _ORIGINAL.setdefault("qwen2_vl._get_input_embeds", qwen2_vl._get_input_embeds)
        qwen2_vl._get_input_embeds = text_only_input_embeds(qwen2_vl._get_input_embeds)
    return True


def persistent_buffers(model: Any) -> dict[str, Any]:
    """Each persistent buffer of ``model`` (what ``state_dict`` holds beside the parameters) by its
    qualified name; meta tensors (layers not materialised yet) are left out."""
    found: dict[str, Any] = {}
    for prefix, module in model.named_modules():
        for name, buffer in module._buffers.items():
            if buffer is not None and name not in module._non_persistent_buffers_set and not buffer.is_meta:
                found[f"{prefix}.{name}" if prefix else name] = buffer
    return found


def keep_constructed_buffers(original: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's dummy loader (``load_format=dummy``, verl's default for its rollout servers:
    ``actor_rollout_ref.rollout.load_format``) that leaves every persistent buffer as the model's
    constructor made it and randomises only the parameters.

    vLLM's ``DummyModelLoader.load_weights`` (``vllm/model_executor/model_loader/dummy_loader.py``)
    randomises every persistent tensor of every layer, buffers included.  verl then sends the actor's
    weights (``verl/workers/rollout/vllm_rollout/utils.py``, ``_update_weights``), which hold only what a
    Hugging Face checkpoint holds, so a buffer that vLLM builds itself stays random for the whole run.
    vLLM 0.32 (the version pinned here) normalises Qwen2-VL/2.5-VL images on the device (``mm_device_do_normalize``):
    ``visual.input_norm``'s ``weight`` and ``bias`` buffers (``vllm/model_executor/layers/fusion/
    mm_input_norm.py``) are the processor's ``rescale_factor / image_std`` and ``-image_mean / image_std``.
    Randomised (about 1e-3), they turned every image into a nearly constant one: the rollouts of
    ``docs/cluster.md`` section 7 saw no map and scored as the blind policy does (0.13 against 0.42).
    Here the buffers are copied before the dummy load and put back after it, which is what a real
    load (``load_format=auto``) leaves them as: no checkpoint names them."""
    import functools

    import torch

    @functools.wraps(original)
    def load_weights(self: Any, model: Any, model_config: Any) -> Any:
        kept = {name: buffer.detach().clone() for name, buffer in persistent_buffers(model).items()}
        result = original(self, model, model_config)
        with torch.no_grad():
            for name, buffer in persistent_buffers(model).items():
                if name in kept and buffer.shape == kept[name].shape:
                    buffer.copy_(kept[name])
        return result

    load_weights.vista_patched = True  # type: ignore[attr-defined]
    return load_weights


def install_vllm_dummy_load_patch() -> bool:
    """:func:`keep_constructed_buffers` on vLLM's dummy loader, in processes that already run vLLM
    (its workers import verl's worker extension, so verl's plugins, before they load the model);
    importing vLLM elsewhere would cost seconds for nothing."""
    if "vllm" not in sys.modules:
        return False
    try:
        from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader
    except ImportError:  # pragma: no cover - a vLLM without this loader
        return False
    if not getattr(DummyModelLoader.load_weights, "vista_patched", False):
        _ORIGINAL.setdefault("DummyModelLoader.load_weights", DummyModelLoader.load_weights)
        DummyModelLoader.load_weights = keep_constructed_buffers(DummyModelLoader.load_weights)  # type: ignore[method-assign]
    return True

"""Scoring training rows as packed sequences: each group's shared prompt computed once.

Why: the update's forward and backward are most of an RL step, and in GRPO the G rows of a group
share their prompt (image tokens, system prompt, history), which is much longer than the replies.
:mod:`vista_plugin_local.packing` lays the rows out as prefix trees in a few packed sequences; this
module runs the model over them with

- a 4-D attention mask in which every token sees exactly its own row's earlier tokens (a reply sees
  the shared prompt and itself, never a sibling reply);
- the position ids each row has on its own (Qwen2.5-VL's M-RoPE positions from ``get_rope_index``
  for the prompt's images, the reply continuing from them), so a reply's positions restart where
  the prompt ends;
- the images of the packed order, each unique image encoded once (:mod:`~.shared_vision`);

then takes the log-probs and entropies of the loss positions only, from the final hidden states in
chunks (:mod:`~.token_logprobs`), and lays them out as the padded batch holds them (``[rows, width]``),
so the losses downstream are unchanged.  A shared token's gradient is the sum over the rows that
share it, as in the padded batch; log-probs, losses and every parameter's gradient equal the padded
path's within float tolerance (``plugins/engines/local/tests/test_packed_update.py``).

Layouts (``engine_config.local.shared_prefix`` / ``packing``): ``shared_prefix`` (rows share their
common prefixes), ``packed`` (rows packed without padding, nothing shared), ``padded`` (one padded
row each, :meth:`Policy.score`).  A model whose family gives no per-row positions, or whose
attention takes no 4-D mask (flash-attention), is scored padded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.config import Layout
from vista_plugin_local.packing import PackPlan, RowKeys, pack_capacity, plan_packs
from vista_plugin_local.packing import row_keys as keys_of
from vista_plugin_local.policy import Policy, Scores
from vista_plugin_local.shared_vision import base_model, supports_precomputed
from vista_plugin_local.token_logprobs import token_logprobs

__all__ = ["LAYOUTS", "Layout", "packing_unsupported", "row_order", "score_rows"]

LAYOUTS: tuple[Layout, ...] = ("shared_prefix", "packed", "padded")

#: Attention implementations that take a custom 4-D mask.
MASKED_ATTENTION = ("sdpa", "eager")


def packing_unsupported(policy: Policy, model: Any) -> str | None:
    """Why ``model`` cannot be scored packed (None: it can)."""
    if not callable(getattr(policy.family, "row_position_ids", None)):
        return f"the {policy.family.name} family gives no per-row position ids"
    base = base_model(model)
    if getattr(base, "model", None) is None or base.get_output_embeddings() is None:
        return f"{type(base).__name__} has no decoder body and LM head to call apart"
    config = base.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    implementation = getattr(text, "_attn_implementation", None) or getattr(config, "_attn_implementation", None)
    if implementation not in MASKED_ATTENTION:
        return f"attention {implementation!r} takes no 4-D mask"
    return None


def row_keys(policy: Policy, seqs: Sequence[EpisodeTokens]) -> list[RowKeys]:
    """Each row's comparable tokens (images by content), numbered consistently across ``seqs``."""
    return keys_of(seqs, policy.encoder.image_token_id, policy.encoder.vision_tokens)


def row_order(policy: Policy, seqs: Sequence[EpisodeTokens], layout: Layout) -> list[int]:
    """An order of ``seqs`` for cutting micro-batches: rows that start alike next to each other
    (``shared_prefix``), or longest first (``packed``); ``padded`` keeps the order.  A mini-batch's
    gradient is a sum over its rows, so reordering them changes it only by float rounding."""
    if layout == "padded":
        return list(range(len(seqs)))
    if layout == "packed":
        return sorted(range(len(seqs)), key=lambda r: -len(seqs[r]))
    keys = row_keys(policy, seqs)
    return sorted(range(len(seqs)), key=lambda r: keys[r].keys.tolist())


def score_rows(policy: Policy, seqs: Sequence[EpisodeTokens], temperature: float, *, layout: Layout,
               entropy: bool = False, values: bool = False, reference: bool = False) -> tuple[Scores, torch.Tensor]:
    """Scores of ``seqs`` as ``[rows, width]`` tensors (the padded batch's layout) and its loss mask.

    Packed layouts compute the log-probs and entropies of the loss positions only (0 elsewhere:
    every loss aggregates under the mask); values at every position of each row."""
    model, adapters_off = policy.scoring_model(reference)
    if layout == "padded" or packing_unsupported(policy, model) is not None:
        batch = policy.collate(seqs, left_pad=False)
        return policy.score(batch, temperature, entropy=entropy, values=values, reference=reference), batch["loss_mask"]
    batch = {key: value.to(policy.device) for key, value in policy.token_tensors(seqs, left_pad=False).items()}
    lengths = [len(seq) for seq in seqs]
    base = base_model(model)
    config = base.config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    plan = plan_packs(seqs, row_keys(policy, seqs), share=layout == "shared_prefix",
                      capacity=pack_capacity(text_config, max(lengths)), pad_id=policy.encoder.pad_id)
    policy.family.reset_generation_state(model)
    with adapters_off, policy.autocast():
        inputs = _packed_inputs(policy, model, plan, seqs, reference)
        hidden = base.model(**inputs, use_cache=False).last_hidden_state
        table = _position_table(plan, lengths, batch["input_ids"].shape, policy.device)
        # position t's log-prob comes from the hidden state of the row's position t - 1
        rows, columns = torch.nonzero(batch["loss_mask"][:, 1:] > 0, as_tuple=True)
        columns = columns + 1
        source = hidden[table[0][rows, columns - 1], table[1][rows, columns - 1]]
        picked, ent = token_logprobs(source, base.get_output_embeddings(), batch["input_ids"][rows, columns],
                                     temperature, policy.encoder.forbidden_ids)
    shape = batch["input_ids"].shape
    logprobs = torch.zeros(shape, dtype=torch.float32, device=policy.device).index_put((rows, columns), picked)
    token_entropy = (torch.zeros(shape, dtype=torch.float32, device=policy.device).index_put((rows, columns), ent)
                     if entropy else None)
    token_values = _values(policy, hidden, table, lengths) if values and policy.value_head is not None else None
    return Scores(logprobs, token_entropy, token_values), batch["loss_mask"]


def _position_table(plan: PackPlan, lengths: Sequence[int], shape: torch.Size,
                    device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bin, packed position)`` of every row token as two ``[rows, width]`` tables (0 past a row's end)."""
    bins = torch.zeros(shape, dtype=torch.long)
    packed = torch.zeros(shape, dtype=torch.long)
    bin_index, pack_index, row_index, column = plan.flat_index(lengths)
    bins[row_index, column] = bin_index
    packed[row_index, column] = pack_index
    return bins.to(device), packed.to(device)


def _packed_inputs(policy: Policy, model: Any, plan: PackPlan, seqs: Sequence[EpisodeTokens],
                   reference: bool) -> dict[str, Any]:
    """The decoder body's keyword arguments for the bins: ids, the 4-D mask, the rows' own
    position ids laid out as the bins, and the images in packed order."""
    device = policy.device
    ids = plan.input_ids.to(device)
    positions = policy.family.row_position_ids(model, seqs, policy.encoder.image_token_id)  # type: ignore[attr-defined]
    visible = plan.visible().to(device)[:, None]
    base = base_model(model)
    text = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
    mask: torch.Tensor = visible
    if getattr(text, "_attn_implementation", None) == "eager":
        dtype = policy.amp_dtype or next(base.parameters()).dtype
        mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill(~visible, torch.finfo(dtype).min)
    inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask,
                              "position_ids": plan.scatter_rows(positions).to(device)}
    if plan.images:
        if policy.dedup_vision and supports_precomputed(model):
            inputs["mm_encoder_outputs"] = {"image": policy.vision.encoder_outputs(
                model, plan.images, device, shared=not reference)}
        else:
            tensors = policy.family.batch_inputs(plan.images, plan.input_ids, torch.ones_like(plan.input_ids),
                                                 policy.encoder.image_token_id)
            tensors.pop("mm_token_type_ids", None)  # only for positions, which are given
            inputs.update({key: value.to(device) for key, value in tensors.items()})
    return inputs


def _values(policy: Policy, hidden: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor],
            lengths: Sequence[int]) -> torch.Tensor:
    """The value head at every row position (position t from the hidden state of t - 1; 0 at 0
    and past the row's end), as :meth:`Policy.score` aligns it."""
    assert policy.value_head is not None
    bins, packed = table
    gathered = hidden[bins[:, :-1], packed[:, :-1]].float()
    out = policy.value_head(gathered).squeeze(-1)
    width = bins.shape[1]
    valid = torch.as_tensor(np.arange(1, width)[None, :] < np.asarray(lengths)[:, None]).to(out.device)
    out = out * valid
    return torch.cat([torch.zeros_like(out[:, :1]), out], dim=1)

"""The local engine's rollout sampling with each episode's KV cache kept between turns.

Why: :meth:`Policy.sample` prefills every prompt whole, so an episode's turn k re-runs turns
1..k-1, and long-horizon episodes cost quadratically (issue 36).  The rollout engine names each
episode (``PolicyBackend.generate(..., episode_keys=...)``); this sampler keeps each episode's keys
and values after a turn and the next turn runs only what it adds, through
:class:`vista_plugin_decodekit.EpisodeKVCache` (the same cache the transformers backend uses: the
longest common prefix, never through a different picture; Qwen-VL M-RoPE positions of appended
images; rows of different cached lengths in one call; a memory bound with a full prefill for a row
that does not fit).  It samples with :meth:`Policy.generation_kwargs`, so greedy replies are those
of :meth:`Policy.sample` token for token and sampled ones come from the same distribution.

With the static-cache decode on (``engine_config.local.static_decode``; :meth:`Policy.sample`), a
call's rows that start their episode (nothing kept for them) run on the static cache and their
caches are kept from it; rows that continue a kept cache run on the dynamic cache it is laid out
in (the two are not combined), as a separate ``generate`` call, counted in
``policy.static_decode.stats`` (``fallback_rows``).  With it off (the default on CPU) every row
runs in one call, as before.

The kept caches hold the policy's activations: they are valid only while its weights do not
change.  Episodes end before the update that follows their rollout (the engine ends them as each
finishes, and every live one when a stream stops); :meth:`CachedSampler.clear` drops them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from vista_plugin_decodekit import DEFAULT_EPISODE_CACHE_MB, EpisodeCacheStats, EpisodeKVCache, RowPrompt
from vista_plugin_decodekit.static_decode import StaticPlan

from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.image_input import ImageInput
from vista_plugin_local.policy import Policy


class _Vision:
    """An image as the cache sees it: which picture (its content digest) and its model inputs,
    made only when asked for (the cache asks only for the images it has to encode)."""

    def __init__(self, image: ImageInput, policy: Policy) -> None:
        self.image = image
        self.policy = policy
        self.key = image.digest or ""

    @property
    def tensors(self) -> Mapping[str, torch.Tensor]:
        """The family's model inputs for this image (what :meth:`Policy.collate` batches)."""
        empty = torch.zeros((1, 0), dtype=torch.long)
        inputs = self.policy.family.batch_inputs([self.image], empty, empty, self.policy.encoder.image_token_id)
        return {key: value for key, value in inputs.items() if key != "mm_token_type_ids"}


class CachedSampler:
    """Samples continuations of named episodes from a :class:`Policy`, reusing their kept caches."""

    def __init__(self, policy: Policy, max_mb: float = DEFAULT_EPISODE_CACHE_MB) -> None:
        self.policy = policy
        self.cache = EpisodeKVCache(policy.model, max_mb)

    @property
    def enabled(self) -> bool:
        return self.cache.enabled

    @property
    def stats(self) -> EpisodeCacheStats:
        return self.cache.stats

    def sample(self, prefixes: Sequence[EpisodeTokens], keys: Sequence[str | None], max_new_tokens: int,
               temperature: float, top_p: float = 1.0) -> list[tuple[list[int], list[float] | None]]:
        """Like :meth:`Policy.sample` (ids and log-probs per prefix); ``keys[i]`` is the episode
        prefix ``i`` continues (``None``: not kept).  An image without a content digest is not
        cached (its row is prefilled whole)."""
        policy = self.policy
        policy.model.eval()
        rows = [RowPrompt(key if all(image.digest for image in prefix.images) else None, list(prefix.input_ids),
                          [_Vision(image, policy) for image in prefix.images])
                for prefix, key in zip(prefixes, keys, strict=True)]
        static, _ = policy.static_decode.active(policy.model, policy.device)
        if not static:
            return self._sample_rows(rows, max_new_tokens, temperature, top_p, static=False)
        kept = [index for index, row in enumerate(rows) if row.key is not None and self.cache.held(row.key)]
        fresh = sorted(set(range(len(rows))) - set(kept))
        result: list[tuple[list[int], list[float] | None]] = [([], None)] * len(rows)
        for group, on_static in ((fresh, True), (kept, False)):
            if group:
                sampled = self._sample_rows([rows[index] for index in group], max_new_tokens, temperature, top_p,
                                            static=on_static)
                for index, reply in zip(group, sampled, strict=True):
                    result[index] = reply
        return result

    def _sample_rows(self, rows: Sequence[RowPrompt], max_new_tokens: int, temperature: float, top_p: float, *,
                     static: bool) -> list[tuple[list[int], list[float] | None]]:
        """One ``generate`` call over ``rows`` laid out by the episode cache.  ``static``: rows that
        reuse nothing, on the static cache (the laid-out dynamic one is dropped and their caches
        are kept from the static one); else on the dynamic cache, counted as a fallback when the
        static decode is on."""
        policy = self.policy
        batch = self.cache.plan(rows, policy.encoder.pad_id, policy.device, max_new_tokens)
        inputs: dict[str, Any] = batch.inputs
        plan = StaticPlan(inputs, rows=len(rows))
        if static and not batch.reused:
            inputs = {key: value for key, value in inputs.items() if key != self.cache.cache_keyword}
            plan = policy.static_decode.plan(policy.model, policy.device, inputs, max_new_tokens,
                                             policy.encoder.pad_id, [policy.encoder.im_end_id])
        elif policy.static_decode.active(policy.model, policy.device)[0]:
            policy.static_decode.fall_back(len(rows), "rows continue their episode's kept KV cache (a dynamic "
                                           "cache; the static cache does not hold it)")
        kwargs, recorder = policy.generation_kwargs(max_new_tokens, temperature, top_p)
        with torch.no_grad(), policy.autocast():
            out = policy.model.generate(**plan.inputs, **policy.planned_kwargs(kwargs, plan),
                                        return_dict_in_generate=True)
        returned = getattr(out, "cache", None)
        self.cache.keep(batch, out.sequences, [policy.encoder.im_end_id],
                        returned if returned is not None else getattr(out, "past_key_values", None))
        return policy.replies(out.sequences[:, batch.width:], recorder, rows=plan.rows)

    def end(self, keys: Sequence[str]) -> None:
        """These episodes ended: free their caches now."""
        self.cache.end(keys)

    def clear(self) -> None:
        """Drop every kept cache (the policy's weights changed)."""
        self.cache.clear()

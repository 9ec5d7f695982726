"""The policy being trained, as a :class:`~vista_rl.model.ModelBackend`.

Why: training must see every turn exactly as evaluation does (tools, reflection, context windows,
timeouts, remote envs), so the local engine rolls out through the core ``RolloutEngine`` like every
other backend.  What training needs beyond a plain backend, this one adds:

- the exact sampled ids and their log-probs in each :class:`~vista_rl.model.Generation`, and the
  full prompt ids, so the engine's token view (``Trajectory.token_view``) holds the sampled tokens;
- the processor tensors of every image of the prompt (``Generation.encoded_images``), which the
  token view keeps (``TokenView.image_inputs``), so the update scores the very pixel values the
  rollout saw, carried by the data itself (no cache for the trainer to empty);
- prompts rendered by :meth:`ChatEncoder.render` (the walk ``vista serve`` and SFT use too), with
  the sampled ids of earlier assistant turns, so turn k+1's prompt extends turn k's prompt plus its
  sampled ids token for token ("exact" alignment).

Each episode's KV cache is kept between its turns when the rollout engine names the episodes
(``episode_keys``; :mod:`~vista_plugin_local.cached_sampling`), so a turn prefills only what it adds,
and :meth:`PolicyBackend.end_episodes` frees an episode's cache when it ends.

Encoded messages are kept by identity for as long as the rollout engine keeps passing them (it
reuses the same ``Message`` objects turn after turn), so each image goes through the processor once
per episode, not once per turn; the G samples of a seed find each other's tensors by image hash in
a weak table, which forgets them when no trajectory holds them any more.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from vista_plugin_decodekit import DEFAULT_EPISODE_CACHE_MB

from vista_plugin_local.cached_sampling import CachedSampler
from vista_plugin_local.chat_tokens import EpisodeTokens, ImageInput
from vista_plugin_local.policy import Policy
from vista_rl import Chat, Generation, Message, ModelBackend, SamplingParams, escape_placeholders
from vista_rl.store import image_hash

#: Text-only messages remembered (system prompts, most feedback), most recent first out.
TEXT_CACHE_SIZE = 4096


@dataclass
class _Segment:
    message: Message  # held so that its id() cannot be reused while cached
    ids: list[int]
    images: list[ImageInput]


@dataclass
class _Reply:
    prompt_end: Message  # the message the reply answered (last message of its chat)
    ids: list[int]
    content: str  # the assistant message the rollout engine appends for it


class PolicyBackend(ModelBackend):
    """Samples from an in-memory :class:`Policy`; see the module docstring for what it adds."""

    def __init__(self, policy: Policy, *, keep_images: bool = True,
                 episode_cache_mb: float = DEFAULT_EPISODE_CACHE_MB) -> None:
        self.policy = policy
        #: each episode's KV cache between turns (0 MB: off; ``sampler.stats``: what it did)
        self.sampler = CachedSampler(policy, episode_cache_mb)
        self.encoder = policy.encoder
        #: End-of-turn ids for the token view builder (``vista_rl.rollout.token_view``).
        self.stop_token_ids = [self.encoder.im_end_id]
        #: Hand each generation its prompt's image tensors (training); off for evaluation-only use.
        self.keep_images = keep_images
        #: Image tensors by image hash while anything still holds them (a weak table).
        self._vision: weakref.WeakValueDictionary[str, ImageInput] = weakref.WeakValueDictionary()
        self._segments: dict[int, _Segment] = {}
        self._replies: dict[int, _Reply] = {}
        #: Text-only messages (system prompts, most feedback) by (role, content): many episodes share them.
        self._texts: OrderedDict[tuple[str, str], list[int]] = OrderedDict()

    # ------------------------------------------------------------------ backend
    def generate(self, chats: Sequence[Chat], params: SamplingParams,
                 episode_keys: Sequence[str | None] | None = None) -> list[list[Generation]]:
        """One call for the whole batch.  A chat that cannot be encoded fails alone: its entry is
        the exception (the rollout engine records it on that episode).  ``episode_keys``: the
        episode each chat continues; with ``n == 1`` their caches are kept between turns."""
        if episode_keys is not None and len(episode_keys) != len(chats):
            raise ValueError(f"episode_keys has {len(episode_keys)} keys for {len(chats)} chats")
        if params.stop:
            raise ValueError("the local engine's policy stops at <|im_end|>; rollout.sampling.stop is not "
                             "supported (remove it)")
        segments: dict[int, _Segment] = {}
        replies: dict[int, _Reply] = {}
        prefixes: list[EpisodeTokens] = []
        rows: list[int] = []
        keys: list[str | None] = []
        outputs: list[list[Generation] | BaseException] = []
        for index, chat in enumerate(chats):
            try:
                prefix = self._render(chat, segments, replies)
            except Exception as exc:  # noqa: BLE001 - a bad message fails its own episode only
                outputs.append(ValueError(f"encoding the prompt failed: {type(exc).__name__}: {exc}"))
                continue
            outputs.append([])
            for _ in range(params.n):
                prefixes.append(prefix)
                rows.append(index)
                keys.append(episode_keys[index] if episode_keys is not None and params.n == 1 else None)
        self._segments, self._replies = segments, replies
        if prefixes:
            sampled = (self.sampler.sample(prefixes, keys, params.max_tokens, params.temperature, params.top_p)
                       if self.sampler.enabled and any(key is not None for key in keys)
                       else self.policy.sample(prefixes, params.max_tokens, params.temperature, params.top_p))
            for row, prefix, (ids, logprobs) in zip(rows, prefixes, sampled, strict=True):
                samples = outputs[row]
                assert isinstance(samples, list)
                text = self.encoder.decode(ids)
                finish = "stop" if ids and ids[-1] == self.encoder.im_end_id else "length"
                samples.append(Generation(text=text, token_ids=ids, logprobs=logprobs,
                                          prompt_token_ids=list(prefix.input_ids), finish_reason=finish,
                                          encoded_images=list(prefix.images) if self.keep_images else None))
                if len(samples) == 1:
                    last = chats[row][-1]
                    replies[id(last)] = _Reply(last, ids, escape_placeholders(text))
        return outputs  # type: ignore[return-value]

    def end_episodes(self, keys: Sequence[str]) -> None:
        """These episodes ended: free their kept caches now (the rollout engine calls it)."""
        self.sampler.end(keys)

    # ---------------------------------------------------------------- rendering
    def _render(self, chat: Chat, segments: dict[int, _Segment], replies: dict[int, _Reply]) -> EpisodeTokens:
        def message_ids(message: Message) -> tuple[list[int], list[ImageInput]]:
            segment = self._segments.get(id(message)) or segments.get(id(message))
            if segment is None or segment.message is not message:
                segment = self._encode(message)
            segments[id(message)] = segment
            return segment.ids, segment.images

        return self.encoder.render(chat, message_ids=message_ids,
                                   reply_ids=lambda position: self._assistant_ids(chat, position, replies))

    def _assistant_ids(self, chat: Chat, position: int, replies: dict[int, _Reply]) -> list[int]:
        """The sampled ids of this assistant turn when this backend sampled it, else its text
        tokenized (a conversation started elsewhere)."""
        message = chat[position]
        if position > 0:
            before = chat[position - 1]
            reply = self._replies.get(id(before)) or replies.get(id(before))
            if reply is not None and reply.prompt_end is before and reply.content == message.content:
                replies[id(before)] = reply
                ids = list(reply.ids)
                if not ids or ids[-1] != self.encoder.im_end_id:
                    ids.append(self.encoder.im_end_id)  # cut at the token limit: the template closes it
                return ids
        return self.encoder.response_ids(message.content)

    def _encode(self, message: Message) -> _Segment:
        images = list(message.images)
        if not images:
            key = (message.role, message.content)
            ids = self._texts.get(key)
            if ids is None:
                ids = self._texts[key] = self.encoder.message_segment(message.role, message.content, [])[0]
                if len(self._texts) > TEXT_CACHE_SIZE:
                    self._texts.popitem(last=False)
            return _Segment(message, ids, [])
        vision: list[ImageInput] | None = None
        refs: list[str] = []
        if self.keep_images or self.sampler.enabled:  # also names each picture for the KV cache
            # the G samples of a seed share their first image: process it once
            refs = [image_hash(image) for image in images]
            known = [self._vision.get(ref) for ref in refs]
            if all(tensors is not None for tensors in known):
                vision = [tensors for tensors in known if tensors is not None]
        ids, inputs = self.encoder.message_segment(message.role, message.content, images, vision)
        for ref, tensors in zip(refs, inputs, strict=False):
            tensors.digest = ref  # the update encodes each unique image once (shared_vision)
            self._vision[ref] = tensors
        return _Segment(message, ids, inputs)

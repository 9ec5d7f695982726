"""The ``transformers`` model backend: any image-text-to-text model through ``AutoProcessor`` +
``AutoModelForImageTextToText``, batched ``generate`` with left padding, on CPU or CUDA.

Two ways in: a model directory (``TransformersBackend(path=...)``), or the live objects
(``TransformersBackend(model=policy, processor=processor)``) so a training engine can sample from
the policy it is updating without saving it first.

Logprobs: by default (``logprobs_mode="processed"``) each generated token's logprob is taken under
the distribution it was sampled from: logits divided by the temperature, restricted to the top-p
nucleus and renormalised (vLLM's ``processed_logprobs``).  With temperature 0 (greedy) that is the
model's raw distribution.  ``logprobs_mode="raw"`` gives the raw model distribution always.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from vista_plugin_decodekit import CachedBatch
from vista_plugin_decodekit.static_decode import StaticDecoder, StaticMode, StaticPlan

from vista_plugin_transformers.chat import encode_chats
from vista_plugin_transformers.episode_state import EpisodeState, episode_cache_size
from vista_plugin_transformers.generation_control import (
    ControlledRows,
    GenerationControl,
    cancelled_generation,
)
from vista_plugin_transformers.image_cache import DEFAULT_CACHE_MB, caching_processor
from vista_plugin_transformers.prompt_ids import EncodedImage, PromptEncoder
from vista_rl import Chat, Generation, ModelBackend, SamplingParams
from vista_rl.chat_render import RenderedIds

LogprobsMode = Literal["processed", "raw"]


def _unpadded(input_ids: Any, attention_mask: Any) -> list[list[int]]:
    """Each row's prompt ids without its padding (one conversion to lists for the batch)."""
    return [[token for token, keep in zip(ids, mask, strict=True) if keep]
            for ids, mask in zip(input_ids.cpu().tolist(), attention_mask.cpu().tolist(), strict=True)]


def resolve_device(device: str | None, model: Any = None) -> str:
    """``auto``/None: the model's device when given a model, else CUDA when available, else CPU."""
    import torch

    if device not in (None, "auto"):
        return str(device)
    if model is not None:
        try:
            return str(next(model.parameters()).device)
        except StopIteration:
            return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


class _LogprobRecorder:
    """A logits processor that records, per step, the logprob of the token sampled at that step
    (and, with ``top_k``, the ``top_k`` most likely tokens and their logprobs, for OpenAI's
    ``top_logprobs``).

    Placed last in the processor list it sees the scores the sampler draws from (after temperature
    and top-p); placed first, the raw scores.  It keeps only one step's log-softmax at a time: at
    each call the token sampled from the previous step's scores is the last column of ``input_ids``.
    """

    def __init__(self, top_k: int = 0) -> None:
        self.top_k = top_k
        self.values: list[Any] = []
        self.top: list[tuple[Any, Any]] = []
        self._pending: Any = None

    def _flush(self, sampled: Any) -> None:
        if self._pending is not None:
            self.values.append(self._pending.gather(1, sampled.view(-1, 1)).squeeze(1))
            if self.top_k:
                best = self._pending.topk(min(self.top_k, self._pending.shape[-1]), dim=-1)
                self.top.append((best.indices.cpu(), best.values.cpu()))
            self._pending = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        self._flush(input_ids[:, -1])
        self._pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens: Any) -> Any:
        """All recorded logprobs as a ``[batch, steps]`` tensor."""
        import torch

        self._flush(last_tokens)
        if not self.values:
            return torch.zeros((last_tokens.shape[0], 0))
        return torch.stack(self.values, dim=1)

    def row_top(self, row: int, steps: int) -> list[list[tuple[int, float]]]:
        """Row ``row``'s ``(token id, logprob)`` alternatives for its first ``steps`` tokens."""
        return [list(zip(ids[row].tolist(), values[row].tolist(), strict=True)) for ids, values in self.top[:steps]]


@dataclass
class GenerateTimings:
    """Where ``generate`` spent its time (cumulative): ``encode_s`` renders, tokenizes and runs the
    image processor (framework work), ``model_s`` is the model's forward and sampling
    (``model.generate``), ``finish_s`` cuts and decodes the outputs (framework work).  A benchmark
    counts only ``model_s`` as model time."""

    encode_s: float = 0.0
    model_s: float = 0.0
    finish_s: float = 0.0
    calls: int = 0


class TransformersBackend(ModelBackend):
    """Generates with a Hugging Face image-text-to-text model.

    ``path``: a model directory or hub id; or pass ``model`` and ``processor`` objects directly.
    ``device``: ``"auto"`` (the model's device, else CUDA if available, else CPU), ``"cpu"``,
    ``"cuda:0"``...  ``max_batch_size`` bounds the rows (chats x n) in one ``generate`` call.
    ``image_cache_mb`` bounds the memory of processed images cached per image (0 turns the cache off).
    ``static_cache``: ``auto`` decodes with a static KV cache and a compiled step on CUDA (see
    :mod:`vista_plugin_decodekit.static_decode`), ``on`` also elsewhere, ``off`` never.
    ``incremental_prompts``: tokenise each message once and a turn's prompt from its pieces (see
    :mod:`~vista_plugin_transformers.prompt_ids`; checked against the processor on the first calls);
    ``False`` renders and tokenises every chat whole, every call.
    ``episode_cache_mb``: the memory bound of the KV caches kept between an episode's turns for
    callers that name episodes (``generate(..., episode_keys=...)``; see
    :mod:`~vista_plugin_transformers.episode_state`); ``None``: 1024 MB unless the static decode is
    on (CUDA), 0: off.  It needs ``incremental_prompts``.
    """

    def __init__(
        self,
        path: str | None = None,
        model: Any = None,
        processor: Any = None,
        device: str | None = "auto",
        dtype: str = "auto",
        logprobs_mode: LogprobsMode = "processed",
        max_batch_size: int = 64,
        trust_remote_code: bool = False,
        image_cache_mb: float = DEFAULT_CACHE_MB,
        static_cache: StaticMode = "auto",
        incremental_prompts: bool = True,
        episode_cache_mb: float | None = None,
    ) -> None:
        if model is None and path is None:
            raise ValueError("transformers backend needs path=MODEL_DIR or model=... and processor=...")
        if model is not None and processor is None and path is None:
            raise ValueError("transformers backend given a model object also needs its processor")
        if logprobs_mode not in ("processed", "raw"):
            raise ValueError(f"logprobs_mode must be 'processed' or 'raw', not {logprobs_mode!r}")
        self.path = path
        if path is not None and (processor is None or model is None):
            from vista_plugin_transformers.hub import resolve_pretrained

            # before importing transformers (seconds): a typo or an unreachable hub fails at once
            path = resolve_pretrained(path)
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if processor is None:
            processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
        if model is None:
            self.device = resolve_device(device)
            assert path is not None  # checked at the top: no model means a path
            # Any: transformers declares ``to`` through functools.wraps, which mypy cannot bind to an instance
            loaded: Any = AutoModelForImageTextToText.from_pretrained(
                path, dtype=dtype, trust_remote_code=trust_remote_code
            )
            model = loaded.to(self.device)
        else:
            self.device = resolve_device(device, model)
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.logprobs_mode: LogprobsMode = logprobs_mode
        self.max_batch_size = max_batch_size
        self.timings = GenerateTimings()
        self.static_decode = StaticDecoder(static_cache, max_rows=max_batch_size)
        # the processor the backend encodes with: processed images cached per image (see image_cache)
        self._encoder, self.image_cache = (caching_processor(processor, image_cache_mb) if image_cache_mb > 0
                                           else (processor, None))
        #: chats tokenised a message at a time (None: whole chats through the processor)
        self.prompts = PromptEncoder.for_processor(self._encoder) if incremental_prompts else None
        self._prompts_checked: set[str] = set()  # "text", "images": compared with the processor's encoding
        #: why whole chats are encoded although incremental prompts were asked for (None: they are not)
        self.prompts_fallback: str | None = None
        #: each episode's KV cache between turns (``episodes.cache.stats``: what it did)
        self.episodes = EpisodeState(model, episode_cache_size(episode_cache_mb, self.static_decode, model,
                                                               self.device))

    # ------------------------------------------------------------------ token ids
    def _eos_ids(self) -> list[int]:
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if configured is None:
            configured = self.tokenizer.eos_token_id
        if configured is None:
            return []
        return [int(configured)] if isinstance(configured, int) else [int(i) for i in configured]

    def _pad_id(self, eos_ids: list[int]) -> int:
        for candidate in (getattr(getattr(self.model, "generation_config", None), "pad_token_id", None),
                          self.tokenizer.pad_token_id):
            if candidate is not None:
                return int(candidate)
        return eos_ids[0] if eos_ids else 0

    # ------------------------------------------------------------------ request validation
    @property
    def max_model_len(self) -> int | None:
        """The context length: prompt plus generated tokens the model's positions cover."""
        config = getattr(self.model, "config", None)
        for owner in (getattr(config, "text_config", None), config):
            value = getattr(owner, "max_position_embeddings", None)
            if isinstance(value, int) and value > 0:
                return value
        value = getattr(self.tokenizer, "model_max_length", None)
        return value if isinstance(value, int) and 0 < value < 10**7 else None

    def special_token_strings(self) -> list[str]:
        """The tokenizer's special tokens as text (``<|image_pad|>``, ``<|im_end|>``...)."""
        found = set(getattr(self.tokenizer, "all_special_tokens", []) or [])
        for token in (getattr(self.tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(token, "special", False):
                found.add(str(token.content))
        return sorted((token for token in found if token), key=len, reverse=True)

    def check_prompt(self, chat: Chat) -> int:
        """Validate one chat on its own and return its prompt length in tokens.

        Raises ValueError with a message for the client.  A server runs this per request before
        batching (as TGI's validation workers do), so a request that cannot be encoded, such as text
        carrying raw ``<|image_pad|>`` tokens that no image backs, fails alone instead of failing
        the ``generate`` call of every request batched with it."""
        specials = self.special_token_strings()
        for index, message in enumerate(chat):
            for token in specials:
                if token in message.content:
                    raise ValueError(f"message {index} contains the special token {token!r} as text; special "
                                     "tokens are the model's own (send images as image_url parts)")
        try:
            inputs = encode_chats(self.processor, [chat], padding_side="left")
        except Exception as exc:  # noqa: BLE001 - any encoding failure is this request's fault
            raise ValueError(f"the request cannot be encoded for this model: {type(exc).__name__}: {exc}") from None
        return int(inputs["input_ids"].shape[1])

    # ------------------------------------------------------------------ generation
    def generate(self, chats: Sequence[Chat], params: SamplingParams, *, top_logprobs: int = 0,
                 control: GenerationControl | None = None,
                 episode_keys: Sequence[str | None] | None = None) -> list[list[Generation]]:
        """``params.n`` generations per chat.  ``top_logprobs``: also keep each token's most likely
        alternatives in ``Generation.metadata["top_logprobs"]`` (per token, ``(token id, logprob)``
        pairs under the same distribution as ``logprobs``), as OpenAI's ``top_logprobs`` returns.
        ``control``: a row its caller cancels stops at the next decode step (cut short, or
        ``finish_reason="abort"`` when it never started), and each step's tokens are handed to it
        as they are sampled (see :mod:`~vista_plugin_transformers.generation_control`).
        ``episode_keys``: which episode each chat continues (``None`` for one that is not an
        episode's): with ``n == 1`` each episode's KV cache is kept after the call and the next call
        prefills only what its chat adds (see :mod:`~vista_plugin_transformers.episode_state`); free
        it with :meth:`end_episodes`.  Greedy replies are the same as without it."""
        if episode_keys is not None and len(episode_keys) != len(chats):
            raise ValueError(f"episode_keys has {len(episode_keys)} keys for {len(chats)} chats")
        keyed = episode_keys is not None and params.n == 1 and self.episodes.enabled and self.prompts is not None
        return self._generate_all(chats, params, top_logprobs, self._encode_chats, control,
                                  keys=list(episode_keys) if keyed and episode_keys is not None else None)

    def end_episodes(self, keys: Sequence[str]) -> None:
        """These episodes ended: free their kept caches now (the rollout engine calls it)."""
        self.episodes.end(keys)

    def _rendered(self, chats: Sequence[Chat]) -> list[RenderedIds[EncodedImage]] | None:
        """The chats' ids from their pieces (:mod:`~vista_plugin_transformers.prompt_ids`), or
        ``None`` when whole chats must be encoded.  Pieces are used once they gave the processor's own
        encoding on a call with images and on one without (checked on those calls)."""
        if self.prompts is None:
            return None
        rendered = [self.prompts.render(chat) for chat in chats]
        kind = "images" if any(message.images for chat in chats for message in chat) else "text"
        if kind in self._prompts_checked:
            return rendered
        reference = encode_chats(self._encoder, chats, padding_side="left")
        if not PromptEncoder.same_as(self.prompts.collate(rendered), reference):
            self.prompts = None
            self.prompts_fallback = (f"the chats' pieces did not give the processor's encoding of a chat with {kind}; "
                                     "encoding whole chats")
            return None
        self._prompts_checked.add(kind)
        return rendered

    def _encode_chats(self, chats: Sequence[Chat]) -> Any:
        """The batch's model inputs (left-padded, as :func:`encode_chats` gives them)."""
        rendered = self._rendered(chats)
        if rendered is None or self.prompts is None:
            return encode_chats(self._encoder, chats, padding_side="left")
        return self.prompts.collate(rendered)

    def _encode_episodes(self, chats: Sequence[Chat], keys: Sequence[str | None], max_new_tokens: int) -> Any:
        """The inputs of rows that continue episodes: their kept caches and only what each adds."""
        rendered = self._rendered(chats)
        if rendered is None or self.prompts is None:
            return encode_chats(self._encoder, chats, padding_side="left")
        pad = self.tokenizer.pad_token_id
        return self.episodes.plan(rendered, keys, int(pad) if pad is not None else 0, self.device, max_new_tokens)

    def generate_text(self, prompts: Sequence[str], params: SamplingParams, *, top_logprobs: int = 0,
                      control: GenerationControl | None = None) -> list[list[Generation]]:
        """Like :meth:`generate` for plain text prompts sent as they are, without the chat template
        (OpenAI's legacy ``/v1/completions``)."""
        return self._generate_all(prompts, params, top_logprobs, self._encode_texts, control)

    def count_text_tokens(self, prompt: str) -> int:
        """How many tokens a plain text prompt encodes to (a server checks the context with it)."""
        return len(self.tokenizer(prompt)["input_ids"])

    def _encode_texts(self, prompts: Sequence[str]) -> Any:
        return self.tokenizer(list(prompts), padding=True, padding_side="left", return_tensors="pt")

    def _generate_all(self, prompts: Sequence[Any], params: SamplingParams, top_logprobs: int,
                      encode: Any, control: GenerationControl | None = None,
                      keys: Sequence[str | None] | None = None) -> list[list[Generation]]:
        rows = [prompt for prompt in prompts for _ in range(params.n)]
        flat: list[Generation] = []
        for start in range(0, len(rows), self.max_batch_size):
            controlled = None
            if control is not None:
                controlled = ControlledRows(control, start, len(rows[start:start + self.max_batch_size]))
                if controlled.all_cancelled():
                    flat.extend(cancelled_generation() for _ in range(controlled.count))
                    continue
            batch_seed = None if params.seed is None else params.seed + start
            started = time.perf_counter()
            chunk = rows[start:start + self.max_batch_size]
            inputs = (encode(chunk) if keys is None
                      else self._encode_episodes(chunk, keys[start:start + self.max_batch_size], params.max_tokens))
            self.timings.encode_s += time.perf_counter() - started
            self.timings.calls += 1
            flat.extend(self._generate_rows(inputs, params, batch_seed, top_logprobs, controlled))
        return [flat[index * params.n:(index + 1) * params.n] for index in range(len(prompts))]

    @contextmanager
    def _eval_mode(self) -> Any:
        was_training = bool(getattr(self.model, "training", False))
        self.model.eval()
        try:
            yield
        finally:
            if was_training:
                self.model.train()

    def _seeded(self, seed: int | None) -> Any:
        import torch

        if seed is None:
            return nullcontext()
        devices = [torch.device(self.device).index or 0] if str(self.device).startswith("cuda") else []

        @contextmanager
        def forked() -> Any:
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                yield

        return forked()

    def _generate_rows(self, inputs: Any, params: SamplingParams, seed: int | None,
                       top_logprobs: int = 0, controlled: ControlledRows | None = None) -> list[Generation]:
        import torch
        from transformers import (
            GenerationConfig,
            LogitsProcessorList,
            TemperatureLogitsWarper,
            TopPLogitsWarper,
        )

        eos_ids = self._eos_ids()
        greedy = params.temperature == 0.0
        recorder = _LogprobRecorder(top_logprobs)
        cached = inputs if isinstance(inputs, CachedBatch) else None
        if cached is not None:  # rows continuing episodes: their kept caches, a dynamic cache (episode_state)
            inputs = cached.inputs
            plan = StaticPlan(inputs, rows=int(inputs["input_ids"].shape[0]))
        else:
            inputs = inputs.to(self.device)
            plan = self.static_decode.plan(self.model, self.device, inputs, params.max_tokens,
                                           self._pad_id(eos_ids), eos_ids)
        # Warpers are passed explicitly (and the config's left neutral) so the recorder can sit after
        # them; a fresh GenerationConfig keeps a checkpoint's own sampling defaults (top_k, repetition
        # penalty) from silently changing the distribution SamplingParams describes.
        processors: list[Any] = list(plan.processors)
        if self.logprobs_mode == "raw":
            processors.append(recorder)
        if not greedy:
            if params.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                processors.append(TopPLogitsWarper(top_p=params.top_p))
        if self.logprobs_mode == "processed":
            processors.append(recorder)
        neutral_sampling = {} if greedy else {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
        config = GenerationConfig(
            max_new_tokens=params.max_tokens,
            do_sample=not greedy,
            num_beams=1,
            eos_token_id=eos_ids or None,
            pad_token_id=self._pad_id(eos_ids),
            stop_strings=list(params.stop) or None,
            return_dict_in_generate=True,
            **neutral_sampling,
            **plan.config,
        )
        prompt_length = inputs["input_ids"].shape[1]
        before = time.perf_counter()
        with self._eval_mode(), torch.no_grad(), self._seeded(seed):
            output = self.model.generate(**plan.inputs, generation_config=config,
                                         logits_processor=LogitsProcessorList(processors),
                                         tokenizer=self.tokenizer if params.stop else None,
                                         **(controlled.generate_kwargs(eos_ids) if controlled is not None else {}))
        generated = time.perf_counter()
        self.timings.model_s += generated - before
        if cached is not None:
            self.episodes.keep(cached, output, eos_ids)
        sequences = output.sequences[:plan.rows]  # padding rows (static batch buckets) dropped
        new_tokens = sequences[:, prompt_length:].cpu().tolist()  # one conversion for the batch, not one per row
        logprobs = recorder.finish(output.sequences[:, -1])[:plan.rows].cpu().tolist() \
            if sequences.shape[1] > prompt_length else None
        prompts = ([list(row.ids) for row in cached.rows] if cached is not None  # the rows' own ids, unpadded
                   else _unpadded(inputs["input_ids"], inputs["attention_mask"]))
        results = []
        for row, ids in enumerate(new_tokens):
            row_logprobs = logprobs[row] if logprobs is not None else []
            generation = self._finish(ids, row_logprobs, prompts[row], eos_ids, params)
            if top_logprobs:
                generation.metadata["top_logprobs"] = recorder.row_top(row, len(generation.token_ids))
            results.append(generation)
        self.timings.finish_s += time.perf_counter() - generated
        return results

    def _finish(self, ids: list[int], logprobs: list[float], prompt: list[int], eos_ids: list[int],
                params: SamplingParams) -> Generation:
        """Cut one row at its end (EOS kept in the ids, as vLLM does; padding dropped), apply stop
        strings (text cut before the stop string; ids kept up to the token that completed it)."""
        finish_reason = "length"
        metadata: dict[str, Any] = {}
        for position, token in enumerate(ids):
            if token in eos_ids:
                ids, finish_reason = ids[:position + 1], "stop"
                break
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if params.stop:
            hits = [(text.find(stop), stop) for stop in params.stop if stop in text]
            if hits:
                cut, stop = min(hits)
                text, finish_reason = text[:cut], "stop"
                metadata["stop"] = stop
                for end in range(1, len(ids) + 1):
                    if stop in self.tokenizer.decode(ids[:end], skip_special_tokens=True):
                        ids = ids[:end]
                        break
        return Generation(text=text, token_ids=ids, logprobs=logprobs[:len(ids)], prompt_token_ids=prompt,
                          finish_reason=finish_reason, metadata=metadata)

    def close(self) -> None:
        self.episodes.cache.clear()
        self.model = None
        self.processor = self._encoder = None

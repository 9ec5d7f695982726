"""The trainable policy: a transformers VLM, its processor, an optional value head, and the two
batched operations the engine needs (sampling continuations, scoring token sequences).

Scoring is written here, not borrowed from a backend, because training must score exactly the ids
that were sampled with the same image tensors, position ids (Qwen's M-RoPE) and temperature.
What differs between VLM families is the policy's :class:`~vista_rl.model_family.ModelFamily`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from vista_plugin_decodekit.static_decode import StaticDecoder, StaticMode, StaticPlan

from vista_plugin_local.chat_tokens import ChatEncoder, EpisodeTokens
from vista_plugin_local.config import LoraSection
from vista_plugin_local.families import family_for
from vista_plugin_local.image_input import ImageInput
from vista_plugin_local.logprob_recorder import LogprobRecorder
from vista_plugin_local.shared_vision import VisionFeatures, base_model, supports_precomputed
from vista_plugin_local.token_logprobs import token_logprobs
from vista_rl import ConfigError


@dataclass
class Scores:
    """Per-position outputs aligned with ``input_ids``: entry ``t`` is about token ``t`` given the
    tokens before it (position 0 is always 0)."""

    logprobs: torch.Tensor
    entropy: torch.Tensor | None
    values: torch.Tensor | None


class ModelBatch(dict[str, torch.Tensor]):
    """A collated batch's tensors that also remember its images in order, so that scoring can
    encode each unique image once (:mod:`vista_plugin_local.shared_vision`)."""

    def __init__(self, tensors: dict[str, torch.Tensor], images: Sequence[ImageInput]) -> None:
        super().__init__(tensors)
        self.images = list(images)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"engine_config.local.device: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("engine_config.local.device: cuda was asked for but no CUDA device is available")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """Mixed precision where the device supports it; ``auto`` is bf16 on capable GPUs, fp32 on CPU."""
    if precision == "fp32":
        return None
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("engine_config.local.precision: fp16 needs a CUDA device; use bf16 or fp32 on CPU")
    return torch.bfloat16 if precision == "bf16" else torch.float16


#: The one advice for a model path that is not a model.
MODEL_ADVICE = ("point model.path to a saved transformers model (a checkpoint's models/<name> works too), "
                "or create a tiny one with `vista model init-tiny OUT_DIR`")


def check_model_dir(path: str | None) -> Path:
    """``model.path`` as a directory that holds a saved transformers model, or a ConfigError that
    says what is wrong and what to do (the one check, for validation and for loading)."""
    if not path:
        raise ConfigError(f"model.path: the local engine needs a model directory; {MODEL_ADVICE}")
    directory = Path(path)
    if not directory.is_dir():
        raise ConfigError(f"model.path: {path} is not a directory; {MODEL_ADVICE}")
    if not (directory / "config.json").is_file():
        raise ConfigError(f"model.path: {path} has no config.json (not a saved transformers model); {MODEL_ADVICE}")
    return directory


def load_pretrained(path: str | None) -> tuple[Any, Any]:
    """Model (fp32) and processor from a model directory (:func:`check_model_dir`)."""
    directory = check_model_dir(path)
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(directory)
    model = AutoModelForImageTextToText.from_pretrained(directory, dtype=torch.float32)
    return model, processor


class Policy:
    """Model + processor + optional value head on one device."""

    def __init__(self, model: Any, processor: Any, device: torch.device, *, value_head: bool = False,
                 precision: str = "fp32", image_size: int | None = None, static_decode: StaticMode = "auto") -> None:
        self.model = model.to(device)
        self.processor = processor
        self.device = device
        self.family = family_for(processor, getattr(model.config, "model_type", None))
        self.encoder = ChatEncoder(processor, image_size=image_size, family=self.family)
        self.amp_dtype = autocast_dtype(precision, device)
        hidden = int(self._text_config().hidden_size)
        self.value_head: nn.Linear | None = nn.Linear(hidden, 1).to(device) if value_head else None
        if self.value_head is not None:
            nn.init.normal_(self.value_head.weight, std=0.02)
            nn.init.zeros_(self.value_head.bias)
        self.reference: Any = None
        self.lora = False
        #: Encode each unique image once per batch in :meth:`score` (off: every occurrence, as
        #: transformers does; tests and benchmarks compare the two).
        self.dedup_vision = True
        self.vision = VisionFeatures()
        #: plans :meth:`sample`'s ``generate`` calls: a static KV cache and a compiled decode step on
        #: CUDA (``engine_config.local.static_decode``; ``static_decode.stats``: what ran, and why not)
        self.static_decode = StaticDecoder(static_decode)

    def _text_config(self) -> Any:
        config = self.model.config
        return getattr(config, "text_config", config)

    # ------------------------------------------------------------------ set-up
    def enable_lora(self, section: LoraSection) -> None:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(r=section.r, lora_alpha=section.alpha, lora_dropout=section.dropout,
                            target_modules=list(section.target_modules))
        self.model = get_peft_model(self.model, config)
        self.lora = True

    def make_reference(self) -> None:
        """A frozen copy for the KL term (with LoRA the base model with adapters off is the reference)."""
        if self.lora:
            return
        self.reference = copy.deepcopy(self.model).eval()
        for parameter in self.reference.parameters():
            parameter.requires_grad_(False)

    def parameters(self) -> list[nn.Parameter]:
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        return params

    def train(self, mode: bool = True) -> None:
        self.model.train(mode)
        if self.value_head is not None:
            self.value_head.train(mode)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def shared_vision(self, seqs: Sequence[EpisodeTokens], micro_batch_size: int) -> contextlib.AbstractContextManager[Any]:
        """Within the block, :meth:`score` of the policy (not the reference) takes the features of
        these sequences' images from one encoding of each unique image; gradients reach the vision
        tower when the block ends (see :meth:`VisionFeatures.share`)."""
        if not self.dedup_vision:
            return contextlib.nullcontext()
        return self.vision.share(self.model, [seq.images for seq in seqs], micro_batch_size, self.device,
                                 self.autocast)

    # ---------------------------------------------------------------- batching
    def token_tensors(self, seqs: Sequence[EpisodeTokens], left_pad: bool) -> dict[str, torch.Tensor]:
        """``input_ids``, ``attention_mask`` and ``loss_mask`` of ``seqs`` padded to the longest (on the CPU)."""
        width = max(len(seq) for seq in seqs)
        ids = torch.full((len(seqs), width), self.encoder.pad_id, dtype=torch.long)
        attention = torch.zeros((len(seqs), width), dtype=torch.long)
        loss_mask = torch.zeros((len(seqs), width), dtype=torch.float32)
        for row, seq in enumerate(seqs):
            n = len(seq)
            sl = slice(width - n, width) if left_pad else slice(0, n)
            ids[row, sl] = torch.tensor(seq.input_ids, dtype=torch.long)
            attention[row, sl] = 1
            loss_mask[row, sl] = torch.tensor(seq.loss_mask, dtype=torch.float32)
        return {"input_ids": ids, "attention_mask": attention, "loss_mask": loss_mask}

    def collate(self, seqs: Sequence[EpisodeTokens], left_pad: bool) -> dict[str, torch.Tensor]:
        batch = self.token_tensors(seqs, left_pad)
        ids, attention = batch["input_ids"], batch["attention_mask"]
        images = [image for seq in seqs for image in seq.images]
        batch.update(self.family.batch_inputs(images, ids, attention, self.encoder.image_token_id))
        return ModelBatch({key: value.to(self.device) for key, value in batch.items()}, images)

    @staticmethod
    def _model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v for k, v in batch.items() if k != "loss_mask"}

    def _reset_rope_cache(self, model: Any) -> None:
        self.family.reset_generation_state(model)

    # -------------------------------------------------------------- generation
    @torch.no_grad()
    def sample(self, prefixes: Sequence[EpisodeTokens], max_new_tokens: int, temperature: float,
               top_p: float = 1.0, *, logprobs: bool = True) -> list[tuple[list[int], list[float] | None]]:
        """Sampled ids per prefix and, with ``logprobs``, each id's log-probability under the
        distribution :meth:`score` computes (logits / temperature, forbidden tokens suppressed;
        greedy decoding reports temperature 1)."""
        self.model.eval()
        batch = self._model_inputs(self.collate(prefixes, left_pad=True))
        self._reset_rope_cache(self.model)
        kwargs, recorder = self.generation_kwargs(max_new_tokens, temperature, top_p, logprobs=logprobs)
        plan = self.static_decode.plan(self.model, self.device, batch, max_new_tokens, self.encoder.pad_id,
                                       [self.encoder.im_end_id])
        with self.autocast():
            out = self.model.generate(**plan.inputs, **self.planned_kwargs(kwargs, plan))
        return self.replies(out[:, batch["input_ids"].shape[1]:], recorder, rows=plan.rows)

    @staticmethod
    def planned_kwargs(kwargs: dict[str, Any], plan: StaticPlan) -> dict[str, Any]:
        """``generate``'s arguments with a static plan's: its config fields (none on the dynamic
        path, so the call is unchanged there) and its logits processors first (the padding rows'
        EOS, before the log-prob recorder sees the scores)."""
        if not plan.config and not plan.processors:
            return kwargs
        merged = {**kwargs, **plan.config}
        if plan.processors:
            from transformers import LogitsProcessorList

            merged["logits_processor"] = LogitsProcessorList([*plan.processors, *kwargs.get("logits_processor", [])])
        return merged

    def generation_kwargs(self, max_new_tokens: int, temperature: float, top_p: float = 1.0, *,
                          logprobs: bool = True) -> tuple[dict[str, Any], LogprobRecorder | None]:
        """The ``generate`` arguments of :meth:`sample` and the recorder of the sampled log-probs
        (shared with the episode-cached sampler, :mod:`~vista_plugin_local.cached_sampling`, so that
        both sample one distribution)."""
        recorder = LogprobRecorder(temperature if temperature > 0 else 1.0) if logprobs else None
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "eos_token_id": self.encoder.im_end_id,
                                  "pad_token_id": self.encoder.pad_id,
                                  "suppress_tokens": self.encoder.forbidden_ids}
        if recorder is not None:
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList([recorder])
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
        else:
            kwargs.update(do_sample=False)
        return kwargs, recorder

    def replies(self, new: torch.Tensor, recorder: LogprobRecorder | None,
                rows: int | None = None) -> list[tuple[list[int], list[float] | None]]:
        """Each row's sampled ids (``new``: the ids ``generate`` appended) up to and with the end
        token, and their log-probs when recorded; only the first ``rows`` rows (the rest are a
        static plan's padding rows; ``None``: all)."""
        picked = recorder.finish(new) if recorder is not None else None
        result: list[tuple[list[int], list[float] | None]] = []
        for row, tokens in enumerate(new[:rows].tolist()):
            ids: list[int] = []
            for token in tokens:
                ids.append(int(token))
                if token == self.encoder.im_end_id:
                    break
            result.append((ids, picked[row, :len(ids)].tolist() if picked is not None else None))
        return result

    # ----------------------------------------------------------------- scoring
    def scoring_model(self, reference: bool = False) -> tuple[Any, contextlib.AbstractContextManager[Any]]:
        """The model a scoring pass runs and the context to run it in: the policy; or the
        reference, a frozen copy, or with LoRA the base model with its adapters off."""
        if not reference:
            return self.model, contextlib.nullcontext()
        if self.lora:
            return self.model, self.model.disable_adapter()
        return self.reference, contextlib.nullcontext()

    def score(self, batch: dict[str, torch.Tensor], temperature: float = 1.0, *, entropy: bool = False,
              values: bool = False, reference: bool = False) -> Scores:
        """Log-probs (at ``temperature``), entropies and values of every position in ``batch``.

        The decoder body gives the final hidden states and the log-probs come from them and the LM
        head in chunks (:func:`~vista_plugin_local.token_logprobs.token_logprobs`), so the
        ``[tokens x vocabulary]`` logits never exist at once."""
        model, adapters_off = self.scoring_model(reference)
        self._reset_rope_cache(model)
        inputs: dict[str, Any] = self._model_inputs(batch)
        images = getattr(batch, "images", None)
        base = base_model(model)
        targets = batch["input_ids"][:, 1:]
        with adapters_off, self.autocast():
            if self.dedup_vision and images and "pixel_values" in inputs and supports_precomputed(model):
                del inputs["pixel_values"]
                inputs["mm_encoder_outputs"] = {"image": self.vision.encoder_outputs(
                    model, images, self.device, shared=not reference)}
            hidden = base.model(**inputs, use_cache=False).last_hidden_state
            # The same distribution generation samples from: forbidden tokens are suppressed there too.
            picked, ent = token_logprobs(hidden[:, :-1].reshape(-1, hidden.shape[-1]), base.get_output_embeddings(),
                                         targets.reshape(-1), temperature, self.encoder.forbidden_ids)
        zeros = torch.zeros((targets.shape[0], 1), dtype=picked.dtype, device=picked.device)
        logprobs = torch.cat([zeros, picked.view(targets.shape)], dim=1)
        token_entropy = torch.cat([zeros, ent.view(targets.shape)], dim=1) if entropy else None
        token_values = None
        if values and self.value_head is not None:
            token_values = torch.cat([zeros, self.value_head(hidden.float()[:, :-1]).squeeze(-1)], dim=1)
        return Scores(logprobs, token_entropy, token_values)

    # ------------------------------------------------------------------ saving
    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()}}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if self.value_head is not None and "value_head" in state:
            self.value_head.load_state_dict(state["value_head"])

    def save_pretrained(self, directory: Path) -> None:
        """A loadable model directory (LoRA merged), so ``vista eval`` and backends can use it."""
        model = copy.deepcopy(self.model).merge_and_unload() if self.lora else self.model
        model.save_pretrained(directory)
        self.processor.save_pretrained(directory)


def micro_batches(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])

"""Each unique image through the vision tower once per batch, its features shared by every sample
that shows it.

Why: the G samples of a seed see the same first image, and per-turn sequences of one episode see
every earlier image again, yet a plain forward encodes each occurrence: the vision tower was a third
of the model forward in the local update.  transformers 5 VLMs (Qwen2-VL / Qwen2.5-VL, InternVL, ...)
take precomputed encoder outputs (``mm_encoder_outputs``), so the policy encodes the unique images,
hands their features to the forward, and autograd sums each shared feature's gradient over the
samples that use it: the same gradient as encoding the image once per sample.

Across the micro-batches of one mini-batch (:meth:`VisionFeatures.share`), the features are computed
once, each micro-batch's backward stops at a detached copy (a leaf), and the summed leaf gradients
go through the vision tower once when the mini-batch ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from vista_plugin_local.image_input import ImageInput


def image_key(image: ImageInput) -> str:
    """The image's digest (set by the policy backend from the image hash), or, for images that
    came another way (SFT data), a hash of its pixel tensor, remembered on the image."""
    if image.digest is None:
        digest = hashlib.blake2b(digest_size=16)
        for tensor in (image.pixel_values, image.grid_thw):
            if tensor is not None:
                flat = tensor.detach().to("cpu").contiguous().reshape(-1)
                digest.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
                digest.update(flat.view(torch.uint8).numpy().tobytes())
        image.digest = "pixels:" + digest.hexdigest()
    return image.digest


def base_model(model: Any) -> Any:
    """The transformers model inside a PEFT wrapper (its LoRA layers injected), or ``model`` itself."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


#: Whether a model class's forward takes precomputed image features, by class.
_TAKES_ENCODER_OUTPUTS: dict[type, bool] = {}


def supports_precomputed(model: Any) -> bool:
    """Whether ``model``'s forward takes precomputed image features (transformers >= 5 VLMs)."""
    model_class = type(base_model(model))
    if model_class not in _TAKES_ENCODER_OUTPUTS:
        try:
            parameters = inspect.signature(model_class.forward).parameters
        except (AttributeError, TypeError, ValueError):
            parameters = {}  # type: ignore[assignment]
        _TAKES_ENCODER_OUTPUTS[model_class] = ("mm_encoder_outputs" in parameters
                                               and hasattr(model_class, "get_image_features"))
    return _TAKES_ENCODER_OUTPUTS[model_class]


def encode_images(model: Any, images: Sequence[ImageInput], device: torch.device) -> tuple[list[torch.Tensor], bool]:
    """One vision-tower call for ``images``: each image's features, and whether the model hands
    them to its forward as a per-image tuple (Qwen-VL) rather than one tensor (InternVL)."""
    kwargs: dict[str, torch.Tensor] = {"pixel_values": torch.cat([i.pixel_values for i in images]).to(device)}
    grids = [image.grid_thw for image in images]
    if all(grid is not None for grid in grids):
        kwargs["image_grid_thw"] = torch.stack([g for g in grids if g is not None]).to(device)
    pooled = model.get_image_features(return_dict=True, **kwargs).pooler_output
    if isinstance(pooled, (tuple, list)):
        return list(pooled), True
    return list(torch.split(pooled, [int(image.pixel_values.shape[0]) for image in images])), False


def micro_batch_budget(counts: Sequence[int], micro_batch_size: int) -> int:
    """The most images one micro-batch of these sequences can hold (their image counts)."""
    return max(1, sum(sorted(counts, reverse=True)[:max(micro_batch_size, 1)]))


class VisionFeatures:
    """Image features of one policy, encoded once per unique image (see the module docstring)."""

    def __init__(self) -> None:
        #: Features by image key inside :meth:`share`; ``None`` outside it.
        self.shared: dict[str, torch.Tensor] | None = None
        self.as_tuple = True
        #: Vision-tower calls so far (tests and benchmarks read it).
        self.calls = 0

    def _encode(self, model: Any, images: Sequence[ImageInput], device: torch.device) -> list[torch.Tensor]:
        features, self.as_tuple = encode_images(model, images, device)
        self.calls += 1
        return features

    def encoder_outputs(self, model: Any, images: Sequence[ImageInput], device: torch.device, *,
                        shared: bool = True) -> Any:
        """``mm_encoder_outputs["image"]`` for a batch whose images are ``images`` in order: the
        shared features where :meth:`share` holds them, the others encoded here, once each."""
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        known = self.shared if shared and self.shared is not None else {}
        keys = [image_key(image) for image in images]
        missing: dict[str, ImageInput] = {}
        for key, image in zip(keys, images, strict=True):
            if key not in known:
                missing.setdefault(key, image)
        local = dict(zip(missing, self._encode(model, list(missing.values()), device), strict=True)) if missing else {}
        features = [known[key] if key in known else local[key] for key in keys]
        pooled: Any = tuple(features) if self.as_tuple else torch.cat(features)
        return BaseModelOutputWithPooling(pooler_output=pooled)

    @contextlib.contextmanager
    def share(self, model: Any, images_per_sequence: Sequence[Sequence[ImageInput]], micro_batch_size: int,
              device: torch.device, autocast: Callable[[], contextlib.AbstractContextManager[Any]]) -> Iterator[None]:
        """Encode the unique images of these sequences once for every forward inside the block.

        Under ``torch.no_grad`` the features are encoded in chunks of at most one micro-batch's
        images.  With gradients, the vision graph of the unique images lives until the block ends,
        so sharing happens only when they are no more than one micro-batch's images (the memory a
        plain micro-batch takes anyway); otherwise each forward still encodes its own unique images
        once.  The block's backward through the vision tower runs when it ends without an error."""
        unique: dict[str, ImageInput] = {}
        for images in images_per_sequence:
            for image in images:
                unique.setdefault(image_key(image), image)
        budget = micro_batch_budget([len(images) for images in images_per_sequence], micro_batch_size)
        grad = torch.is_grad_enabled()
        if not unique or self.shared is not None or not supports_precomputed(model) or (grad and len(unique) > budget):
            yield
            return
        keys, images = list(unique), list(unique.values())
        with autocast():
            features = [feature for start in range(0, len(images), budget)
                        for feature in self._encode(model, images[start:start + budget], device)]
        leaves = [feature.detach().requires_grad_() for feature in features] if grad else features
        self.shared = dict(zip(keys, leaves, strict=True))
        try:
            yield
        finally:
            self.shared = None
        if grad:
            pairs = [(feature, leaf.grad) for feature, leaf in zip(features, leaves, strict=True)
                     if leaf.grad is not None and feature.requires_grad]
            if pairs:
                torch.autograd.backward([feature for feature, _ in pairs], [g for _, g in pairs])

"""Pluggable vision encoders for the SVG env's embedding score.

VAGEN scores SVG renders with DINO and DreamSim features.  Those weights cannot ship with the env, so
the encoder is named in the config and loaded on first use:

* ``"tiny-random"``: a tiny randomly initialised DINOv2 (real transformers class, fixed seed). For
  tests and smoke runs only: its features carry no meaning;
* ``"hf:<name-or-path>"`` or a local folder: any Hugging Face vision backbone with an image processor
  (``facebook/dinov2-small``, a DINOv2/ViT/CLIP-vision checkpoint folder).  The embedding is the
  pooled output, or the CLS token when the model has no pooler;
* ``"<module>:<callable>"``: a factory returning any object with ``embed(images) -> array (N, D)``;
  wrap DreamSim (or anything else) this way.

torch and transformers load only when an embedding score is asked for.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image


@runtime_checkable
class VisionEncoder(Protocol):
    """Anything that maps images to one feature vector each."""

    def embed(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Features of ``images``, shape ``(len(images), dim)``."""
        ...


class HFVisionEncoder:
    """A Hugging Face vision backbone (DINOv2, ViT, ...) with its image processor, on CPU or ``device``."""

    def __init__(self, model: Any, processor: Any, device: str = "cpu") -> None:
        self.model = model.to(device).eval()
        self.processor = processor
        self.device = device

    @classmethod
    def from_pretrained(cls, name_or_path: str, device: str = "cpu") -> HFVisionEncoder:
        from transformers import AutoImageProcessor, AutoModel  # noqa: PLC0415 - optional heavy import

        return cls(AutoModel.from_pretrained(name_or_path), AutoImageProcessor.from_pretrained(name_or_path), device)

    def embed(self, images: Sequence[Image.Image]) -> np.ndarray:
        import torch  # noqa: PLC0415

        inputs = self.processor(images=[image.convert("RGB") for image in images], return_tensors="pt")
        with torch.no_grad():
            output = self.model(pixel_values=inputs["pixel_values"].to(self.device))
        pooled = getattr(output, "pooler_output", None)
        features = pooled if pooled is not None else output.last_hidden_state[:, 0]
        return features.float().cpu().numpy()


def tiny_random_dinov2(seed: int = 0, image_size: int = 56) -> HFVisionEncoder:
    """A tiny DINOv2 with random weights drawn from ``seed`` (same features in every process)."""
    import torch  # noqa: PLC0415
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model  # noqa: PLC0415

    config = Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                          patch_size=14, image_size=image_size)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Dinov2Model(config)
    finally:
        torch.random.set_rng_state(generator_state)
    processor = BitImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size,
                                  "width": image_size}, do_center_crop=True,
                                  image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
    return HFVisionEncoder(model, processor)


@functools.lru_cache(maxsize=4)
def load_encoder(spec: str, device: str = "cpu") -> VisionEncoder:
    """The encoder named by ``spec`` (see the module docstring), loaded once per process."""
    if spec == "tiny-random":
        return tiny_random_dinov2()
    if spec.startswith("hf:"):
        return HFVisionEncoder.from_pretrained(spec[3:], device)
    if Path(spec).is_dir():
        return HFVisionEncoder.from_pretrained(spec, device)
    if ":" in spec:
        module, _, name = spec.partition(":")
        factory = getattr(importlib.import_module(module), name)
        encoder = factory()
        if not isinstance(encoder, VisionEncoder):
            raise TypeError(f"encoder factory {spec!r} returned {type(encoder).__name__}, which has no embed(images)")
        return encoder
    raise ValueError(f"unknown encoder {spec!r}: use 'tiny-random', 'hf:<name-or-path>', a model folder, "
                     "or '<module>:<factory>'")

"""Pluggable vision encoders for the SVG env's embedding score.

VAGEN scores SVG renders with DINO and DreamSim features.  Those weights cannot ship with the env, so
the encoder is named in the config and loaded on first use:

* ``"tiny-random"``: a tiny randomly initialised DINOv2 (real transformers class, fixed seed). For
  tests and smoke runs only: its features carry no meaning;
* ``"hf:<name-or-path>"`` or a local folder: any Hugging Face vision backbone with an image processor
  (``facebook/dinov2-small``, a DINOv2/ViT/CLIP-vision checkpoint folder).  The embedding is the
  pooled output, or the CLS token when the model has no pooler;
* ``"<module>:<callable>"``: a class with ``embed(images) -> array (N, D)``, or a function annotated
  to return one (``-> VisionEncoder``), called with no arguments; wrap DreamSim (or anything else)
  this way.

A ``module:callable`` is code the run config names (a :data:`vista_rl.config_fields.ImportTarget`
field): its shape is checked when the config is validated, and what it names is checked to be an
encoder class or an encoder-returning function after the import and BEFORE it is called, so a
config cannot make the env call an arbitrary function (``os:abort``) just to find out it was not
an encoder.

torch and transformers load only when an embedding score is asked for.
"""

from __future__ import annotations

import functools
import inspect
import pkgutil
import re
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

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


#: ``package.module:factory``, the shape a code-naming encoder spec must have
_FACTORY = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
#: encoder specs that name no code (the run-config check skips them; see vista_rl.import_targets)
NON_CODE_PREFIXES = ("hf:",)
EncoderKind = Literal["tiny-random", "hf", "folder", "factory"]
_FORMS = "'tiny-random', 'hf:<name-or-path>', a model folder, or '<module>:<factory>'"


def encoder_kind(spec: str) -> EncoderKind:
    """What ``spec`` names, from its shape alone (nothing imported or opened); ``ValueError`` when it
    is none of the accepted forms.  A string that is neither is taken as a model folder, whose
    existence is checked when the encoder loads."""
    if spec == "tiny-random":
        return "tiny-random"
    if spec.startswith("hf:"):
        if not spec[3:].strip():
            raise ValueError(f"encoder {spec!r}: 'hf:' needs a model name or path after it")
        return "hf"
    if _FACTORY.match(spec):
        return "factory"
    if ":" in spec and not any(sep in spec for sep in ("/", "\\")):
        raise ValueError(f"encoder {spec!r} is not a valid '<module>:<factory>' (dotted Python names); "
                         f"use {_FORMS}")
    return "folder"


def check_encoder_factory(spec: str, factory: Any) -> Callable[[], Any]:
    """``factory`` (what ``spec`` imported) if it is an encoder class or a function annotated to
    return one and callable with no arguments; ``TypeError`` otherwise.  Runs before the call, so a
    config that names any other callable (``os:abort``, ``subprocess:Popen``) never gets it called."""
    made: Any
    if isinstance(factory, type):
        made, what = factory, f"class {factory.__qualname__}"
    elif inspect.isfunction(factory) or inspect.ismethod(factory):
        try:
            made = typing.get_type_hints(factory).get("return")
        except Exception:  # noqa: BLE001 - an unresolvable annotation is no declared encoder
            made = None
        what = f"function {factory.__qualname__}"
        if not isinstance(made, type):
            raise TypeError(f"encoder factory {spec!r} is a {what} without a return annotation naming an encoder "
                            "class; annotate it (-> VisionEncoder, or your class with embed(images)) so that it "
                            "can be checked before it is called")
    else:
        raise TypeError(f"encoder factory {spec!r} names a {type(factory).__name__}, not a class with "
                        "embed(images) or a function returning one; it was not called")
    if not callable(getattr(made, "embed", None)):
        raise TypeError(f"encoder factory {spec!r} is a {what} whose {made.__qualname__} has no embed(images); "
                        "it was not called")
    try:
        inspect.signature(factory).bind()
    except TypeError as exc:
        raise TypeError(f"encoder factory {spec!r} must be callable with no arguments ({exc}); it was not called") \
            from None
    except ValueError:  # pragma: no cover - no signature to read: the call itself decides
        pass
    return typing.cast(Callable[[], Any], factory)


@functools.lru_cache(maxsize=4)
def load_encoder(spec: str, device: str = "cpu") -> VisionEncoder:
    """The encoder named by ``spec`` (see the module docstring), loaded once per process.  The
    shape of ``spec`` is checked before anything is imported, and what a ``module:factory`` names
    before it is called (:func:`check_encoder_factory`)."""
    kind = encoder_kind(spec)
    if kind == "tiny-random":
        return tiny_random_dinov2()
    if kind == "hf":
        return HFVisionEncoder.from_pretrained(spec[3:], device)
    if Path(spec).is_dir():
        return HFVisionEncoder.from_pretrained(spec, device)
    if kind == "folder":
        raise ValueError(f"unknown encoder {spec!r}: no such model folder; use {_FORMS}")
    factory = check_encoder_factory(spec, pkgutil.resolve_name(spec))
    encoder = factory()
    if not isinstance(encoder, VisionEncoder):
        raise TypeError(f"encoder factory {spec!r} returned {type(encoder).__name__}, which has no embed(images)")
    return encoder

"""A ``module:factory`` encoder is code a run config names: its shape is checked with the config,
and what it names is checked to be an encoder class or an encoder-returning function BEFORE it is
called (the old loader called any callable and looked at the result afterwards, so ``os:abort``
aborted the trainer and ``subprocess:Popen``-like names ran)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from vista_plugin_svg.encoders import VisionEncoder, encoder_kind, load_encoder
from vista_plugin_svg.env import SvgEnvConfig

import vista_rl

CALLS: list[str] = []


class NotAnEncoder:
    """A class with no embed(images): making it is already a side effect."""

    def __init__(self) -> None:
        CALLS.append("NotAnEncoder()")


def unannotated_factory():  # noqa: ANN201 - the point: nothing says what it returns
    CALLS.append("unannotated_factory()")
    return NotAnEncoder()


def factory_of_a_non_encoder() -> NotAnEncoder:
    CALLS.append("factory_of_a_non_encoder()")
    return NotAnEncoder()


def factory_with_arguments(path: str) -> VisionEncoder:
    CALLS.append(f"factory_with_arguments({path})")
    raise AssertionError("never called")


class MeanColour:
    def embed(self, images: list[Image.Image]) -> np.ndarray:
        return np.stack([np.asarray(image.convert("RGB"), dtype=np.float64).mean(axis=(0, 1)) + 1.0
                         for image in images])


def annotated_factory() -> VisionEncoder:
    CALLS.append("annotated_factory()")
    return MeanColour()


def lying_factory() -> MeanColour:
    """Says it makes an encoder, makes something else: caught after the call, as before."""
    CALLS.append("lying_factory()")
    return NotAnEncoder()  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def _fresh():
    CALLS.clear()
    load_encoder.cache_clear()
    yield
    load_encoder.cache_clear()


@pytest.mark.parametrize(("name", "message"), [
    ("unannotated_factory", "without a return annotation"),
    ("factory_of_a_non_encoder", "no embed"),
    ("NotAnEncoder", "no embed"),
    ("factory_with_arguments", "no arguments"),
    ("CALLS", "not a class"),
])
def test_what_a_factory_names_is_checked_before_it_is_called(name: str, message: str) -> None:
    with pytest.raises(TypeError, match=message) as caught:
        load_encoder(f"{__name__}:{name}")
    assert "not called" in str(caught.value) or "annotate" in str(caught.value)
    assert CALLS == [], f"the encoder factory ran before its type was checked: {CALLS}"


def test_a_builtin_callable_is_never_called() -> None:
    # ``time:sleep`` would block, ``os:abort`` would kill the process: builtins have no annotations
    with pytest.raises(TypeError, match="not a class with embed"):
        load_encoder("time:sleep")


def test_a_declared_encoder_factory_or_class_loads_and_embeds() -> None:
    encoder = load_encoder(f"{__name__}:annotated_factory")
    assert CALLS == ["annotated_factory()"]
    assert encoder.embed([Image.new("RGB", (8, 8), "red")]).shape == (1, 3)
    assert isinstance(load_encoder(f"{__name__}:MeanColour"), MeanColour)
    with pytest.raises(TypeError, match="returned NotAnEncoder"):
        load_encoder(f"{__name__}:lying_factory")


@pytest.mark.parametrize("spec", ["svg_never_imported_module:factory()", "a b:c", "pkg:", "hf:"])
def test_a_malformed_encoder_fails_with_the_config_before_any_import(spec: str) -> None:
    with pytest.raises(ValidationError, match="encoder"):
        SvgEnvConfig(encoder=spec, embedding_weight=1.0)
    assert "svg_never_imported_module" not in sys.modules


@pytest.mark.parametrize(("spec", "kind"), [("tiny-random", "tiny-random"), ("hf:facebook/dinov2-small", "hf"),
                                            ("hf:dinov2", "hf"), ("pkg.mod:Factory", "factory"),
                                            ("models/dino", "folder"), ("C:\\models\\dino", "folder")])
def test_encoder_kind_reads_the_shape_only(spec: str, kind: str) -> None:
    assert encoder_kind(spec) == kind


def test_the_env_refuses_an_unchecked_factory_on_its_first_embedding() -> None:
    env = vista_rl.make_env("svg/reconstruct-v0", image_size=56, embedding_weight=1.0,
                            encoder=f"{__name__}:unannotated_factory")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="return annotation"):
        env.step(env.oracle_response())
    env.close()
    assert CALLS == []

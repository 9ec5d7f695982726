"""Similarity scores and the pluggable encoder: a tiny random DINOv2 (real transformers class) saved
with ``save_pretrained`` and loaded back by path, the way a user's DINO/DreamSim-class weights are."""

import numpy as np
import pytest
from PIL import Image, ImageDraw
from vista_plugin_svg.encoders import HFVisionEncoder, VisionEncoder, load_encoder, tiny_random_dinov2
from vista_plugin_svg.similarity import RewardWeights, combine, cosine_score, pixel_score, ssim_score

import vista_rl

ENV_ID = "svg/reconstruct-v0"


def picture(box=(10, 10, 40, 40), colour=(220, 40, 40), size=64):
    image = Image.new("RGB", (size, size), "white")
    ImageDraw.Draw(image).rectangle(box, fill=colour)
    return image


def test_identical_images_score_one_and_scores_rank_closeness():
    target = picture()
    assert pixel_score(target, target) == 1.0 and ssim_score(target, target) == pytest.approx(1.0)
    near, far = picture((12, 12, 42, 42)), picture((40, 40, 60, 60), (40, 80, 220))
    assert ssim_score(near, target) > ssim_score(far, target)
    assert pixel_score(near, target) > pixel_score(far, target)
    inverted = Image.eval(target, lambda v: 255 - v)
    assert ssim_score(inverted, target) < 0.2 and pixel_score(inverted, target) < 0.2


def test_scores_resize_the_render_to_the_target():
    target = picture(size=64)
    assert pixel_score(target.resize((128, 128), Image.Resampling.NEAREST), target) > 0.97


def test_combine_is_vagens_clipped_weighted_sum():
    scores = {"pixel": 0.5, "ssim": 0.25, "embedding": 0.8}
    assert combine(scores, RewardWeights(pixel=1.0, ssim=2.0, embedding=0.5)) == pytest.approx(0.5 + 0.5 + 0.4)
    assert combine({"ssim": 0.3}, RewardWeights(pixel=0.0, ssim=1.0)) == pytest.approx(0.3)  # unused terms optional
    assert combine({"pixel": -2.0}, RewardWeights(pixel=1.0, ssim=0.0)) == 0.0


def test_cosine_score_handles_zero_and_opposite_vectors():
    assert cosine_score(np.ones(4), np.ones(4)) == pytest.approx(1.0)
    assert cosine_score(np.ones(4), -np.ones(4)) == 0.0
    assert cosine_score(np.zeros(4), np.ones(4)) == 0.0


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory):
    """A tiny random DINOv2 checkpoint on disk: the stand-in for real DINO weights."""
    encoder = tiny_random_dinov2(seed=3)
    folder = tmp_path_factory.mktemp("tiny-dinov2")
    encoder.model.save_pretrained(folder)
    encoder.processor.save_pretrained(folder)
    return folder


def test_encoder_loads_from_a_folder_and_embeds(tiny_encoder_dir):
    encoder = load_encoder(str(tiny_encoder_dir))
    assert isinstance(encoder, HFVisionEncoder) and isinstance(encoder, VisionEncoder)
    assert type(encoder.model).__name__ == "Dinov2Model"
    features = encoder.embed([picture(), picture((30, 30, 60, 60))])
    assert features.shape == (2, 32) and np.isfinite(features).all()
    assert not np.allclose(features[0], features[1])
    again = load_encoder(f"hf:{tiny_encoder_dir}").embed([picture()])
    assert np.allclose(again[0], features[0], atol=1e-5)


def test_tiny_random_encoder_is_the_same_in_every_load():
    a = tiny_random_dinov2(seed=0).embed([picture()])
    b = tiny_random_dinov2(seed=0).embed([picture()])
    assert np.allclose(a, b)


def test_env_embedding_score_through_a_user_encoder(tiny_encoder_dir):
    env = vista_rl.make_env(ENV_ID, image_size=56, ssim_weight=0.0, embedding_weight=2.0,
                            encoder=str(tiny_encoder_dir), format_reward=0.0)
    env.reset(seed=0)
    oracle = env.step(env.oracle_response())
    assert oracle.info["scores"]["embedding"] == pytest.approx(1.0, abs=1e-5)
    assert oracle.reward == pytest.approx(2.0, abs=1e-4)
    env.reset(seed=0)
    red = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="red"/></svg>'
    other = env.step(f"<think>x</think><answer>{red}</answer>")
    assert other.info["scores"]["embedding"] < 1.0
    assert other.reward == pytest.approx(2.0 * other.info["scores"]["embedding"], abs=1e-6)


class CountingEncoder:
    """An encoder from a ``module:factory`` spec: mean colour as the feature."""

    def embed(self, images):
        return np.stack([np.asarray(image.convert("RGB"), dtype=np.float64).mean(axis=(0, 1)) + 1.0
                         for image in images])


def make_counting_encoder() -> CountingEncoder:
    return CountingEncoder()


def test_encoder_from_module_factory_and_bad_specs():
    encoder = load_encoder(f"{__name__}:make_counting_encoder")
    assert encoder.embed([picture()]).shape == (1, 3)
    with pytest.raises(ValueError, match="unknown encoder"):
        load_encoder("no-such-encoder")
    with pytest.raises(TypeError, match="no embed"):
        load_encoder("builtins:dict")


def test_tiny_random_encoder_by_name_in_the_env_config():
    env = vista_rl.make_env(ENV_ID, image_size=56, embedding_weight=1.0, encoder="tiny-random")
    env.reset(seed=1)
    result = env.step(env.oracle_response())
    assert result.info["scores"]["embedding"] == pytest.approx(1.0, abs=1e-5)
    assert result.reward == pytest.approx(0.5 + 1.0 + 1.0, abs=1e-4)  # format + ssim + embedding

"""The SFT stage's rows through verl's own SFT dataset (``MultiTurnSFTDataset``) with the tiny
Qwen2.5-VL processor: per-turn rows hold the context that turn showed, the loss covers the replies
only, and the images reach the processor with the pixels RL shows (verl reads them with
``qwen_vl_utils.fetch_image``, which rescales unless told the size)."""

from __future__ import annotations

import os

import pytest
import torch
from PIL import Image

pytest.importorskip("verl.utils.dataset.multiturn_sft_dataset")
pytest.importorskip("qwen_vl_utils")

from omegaconf import OmegaConf  # noqa: E402
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset  # noqa: E402
from vista_plugin_verl import sft  # noqa: E402
from vista_plugin_verl.sft_dataset import VistaSFTDataset, decoded  # noqa: E402

from vista_rl import Trajectory, Turn  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _image(colour: tuple[int, int, int], size: int = 56) -> Image.Image:
    image = Image.new("RGB", (size, size), colour)
    image.putpixel((3, 5), (255 - colour[0], 7, 9))  # not flat: a rescale would show
    return image


def episode() -> Trajectory:
    first, second = _image((200, 10, 10)), _image((10, 200, 10))
    return Trajectory(env_id="x", seed=0, system_prompt="Name the colour.", initial_images=[first], turns=[
        Turn(observation="<image> What colour?", response="<answer>red</answer>", images=[first]),
        Turn(observation="Wrong. <image> And now?", response="<answer>green</answer>", images=[second]),
    ])


def test_rows_are_cut_as_the_local_engine_cuts_its_examples() -> None:
    whole = sft.episode_rows(episode(), per_turn=False, window_size=None, image_size=None)
    per_turn = sft.episode_rows(episode(), per_turn=True, window_size=0, image_size=28)
    assert [m["role"] for m in whole[0]["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert len(whole[0]["images"]) == 2
    assert len(per_turn) == 2 and [m["role"] for m in per_turn[1]["messages"]] == ["system", "user", "assistant"]
    assert per_turn[1]["messages"][1]["content"] == "Wrong. <image> And now?"
    assert per_turn[1]["messages"][2]["content"] == "<answer>green</answer>"
    sizes = [decoded(image).size for row in per_turn for image in row["images"]]
    assert sizes == [(28, 28)] * 2  # rollout.image_size, as the episode driver shows them


@pytest.fixture(scope="module")
def main_job_model(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The tiny model as the main job makes it: min_pixels 28*28, so a 28x28 map is one vision token."""
    from vista_rl_sdk.tiny_models import init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("tiny"), min_pixels=28 * 28)


def _dataset(tmp_path, rows, cls, model):  # type: ignore[no-untyped-def]
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model)
    path = sft.write_rows(tmp_path / f"{cls.__name__}.parquet", rows)
    config = OmegaConf.create({"messages_key": "messages", "max_length": 1024, "truncation": "error",
                               "pad_mode": "right", "image_patch_size": 14})
    return processor, cls(parquet_files=str(path), tokenizer=processor.tokenizer, config=config, processor=processor)


def test_verls_sft_dataset_trains_the_replies_with_the_pixels_rl_shows(tmp_path, main_job_model) -> None:  # type: ignore[no-untyped-def]
    rows = sft.episode_rows(episode(), per_turn=True, window_size=0, image_size=28)
    processor, dataset = _dataset(tmp_path, rows, VistaSFTDataset, main_job_model)
    assert len(dataset) == 2
    item = dataset[1]
    text = processor.tokenizer.decode(item["input_ids"][item["loss_mask"].bool()].tolist())
    assert "<answer>green</answer>" in text and "And now" not in text and "red" not in text
    # the processor gets the 28x28 image itself, as in RL (verl's agent loop re-runs it on the PIL images)
    shown = decoded(rows[1]["images"][0])
    rl = processor.image_processor(images=[shown], return_tensors="pt")
    torch.testing.assert_close(item["multi_modal_inputs"]["pixel_values"], rl["pixel_values"])
    assert item["multi_modal_inputs"]["image_grid_thw"].tolist() == rl["image_grid_thw"].tolist()
    assert rl["image_grid_thw"].tolist() == [[1, 2, 2]]  # one merged vision token
    # verl's own dataset rescales it first (qwen_vl_utils.fetch_image: at least 56x56): 4 tokens, not 1
    _processor, plain = _dataset(tmp_path, rows, MultiTurnSFTDataset, main_job_model)
    assert plain[1]["multi_modal_inputs"]["image_grid_thw"].tolist() == [[1, 4, 4]]


def test_the_sft_stage_selects_our_dataset_class() -> None:
    from types import SimpleNamespace

    from vista_rl.config import RunConfig

    run = RunConfig.model_validate({"env": {"id": "x"}, "model": {"path": "m"}, "sft": {"steps": 2}})
    cfg = SimpleNamespace(cluster=SimpleNamespace(n_gpus_per_node=1, max_prompt_length=64, max_response_length=64),
                          sft_overrides=[])
    pairs = dict(item.split("=", 1) for item in sft.overrides(run, cfg, "t.parquet"))
    assert pairs["data.custom_cls.name"] == "VistaSFTDataset"
    assert pairs["data.custom_cls.path"].endswith("vista_plugin_verl/sft_dataset.py")

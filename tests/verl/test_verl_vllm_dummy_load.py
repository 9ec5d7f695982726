"""vLLM's dummy load (verl's ``load_format=dummy`` for its rollout servers) randomised the buffers vLLM
builds itself, which no weight sync ever sets: Qwen2.5-VL's on-device image normalisation
(``visual.input_norm``) stayed random and every rollout image came out nearly constant (docs/cluster.md
section 7).  Reproduced with vLLM's own loader and normalisation module, then the patch
(``vista_plugin_verl.patches.keep_constructed_buffers``), and once through a real ``vllm.LLM``.

Needs vLLM and verl in one interpreter, as verl's rollout workers have them: the overlay of
``scripts/verl_cpu_step/run.sh`` (``/tmp/verlcpu/bin/python -m pytest tests/verl/test_verl_vllm_dummy_load.py``);
skipped where vLLM is not installed (the main and verl environments)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("vllm")
dummy_loader = pytest.importorskip("vllm.model_executor.model_loader.dummy_loader")
mm_input_norm = pytest.importorskip("vllm.model_executor.layers.fusion.mm_input_norm")

from vista_plugin_verl import patches  # noqa: E402
from vllm.config import VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.config.load import LoadConfig  # noqa: E402

# Qwen2-VL's processor constants (CLIP's mean and std, 1/255)
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
RESCALE = 1 / 255


class Tower(nn.Module):
    """A layer with weights and vLLM's own image normalisation, as Qwen2.5-VL's vision tower has them."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        with set_current_vllm_config(VllmConfig()):  # vLLM's custom ops are built under a config
            self.input_norm = mm_input_norm.FusedMMInputNorm(MEAN, STD, RESCALE)


def expected_norm() -> tuple[torch.Tensor, torch.Tensor]:
    std, mean = torch.tensor(STD), torch.tensor(MEAN)
    return RESCALE / std, -mean / std


def dummy_load(load_weights: Any, model: nn.Module) -> None:
    loader = dummy_loader.DummyModelLoader(LoadConfig(load_format="dummy"))
    load_weights(loader, model, None)


def original_loader() -> Any:
    return patches._ORIGINAL.get("DummyModelLoader.load_weights", dummy_loader.DummyModelLoader.load_weights)


def test_vllms_dummy_load_randomises_the_image_normalisation() -> None:
    loader = original_loader()
    assert not getattr(loader, "vista_patched", False)
    model = Tower()
    dummy_load(loader, model)
    weight, bias = expected_norm()
    assert not torch.allclose(model.input_norm.weight, weight, atol=1e-3)
    assert not torch.allclose(model.input_norm.bias, bias, atol=1e-3)


def test_the_patched_dummy_load_keeps_the_buffers_and_randomises_the_weights() -> None:
    assert patches.install_vllm_dummy_load_patch()
    assert getattr(dummy_loader.DummyModelLoader.load_weights, "vista_patched", False)
    torch.manual_seed(0)
    model = Tower()
    before = model.proj.weight.detach().clone()
    dummy_load(dummy_loader.DummyModelLoader.load_weights, model)
    weight, bias = expected_norm()
    torch.testing.assert_close(model.input_norm.weight, weight)
    torch.testing.assert_close(model.input_norm.bias, bias)
    assert not torch.equal(model.proj.weight, before)  # the parameters are still the loader's random values


def test_persistent_buffers_leave_out_non_persistent_ones() -> None:
    model = Tower()
    model.register_buffer("scratch", torch.zeros(2), persistent=False)
    assert set(patches.persistent_buffers(model)) == {"input_norm.weight", "input_norm.bias"}


def test_a_dummy_loaded_qwen_vl_in_vllm_keeps_its_image_normalisation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model vLLM builds for verl's rollout (``load_format=dummy``): its vision tower's normalisation
    is the processor's, as after a real load."""
    from vllm import LLM

    from vista_rl_sdk.tiny_models import cached_tiny_model

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the model in this process, for apply_model
    path = Path(cached_tiny_model())
    processor = json.loads((path / "processor_config.json").read_text())
    processor = processor.get("image_processor", processor)
    assert processor["image_mean"] == pytest.approx(MEAN) and processor["image_std"] == pytest.approx(STD)
    assert patches.install_vllm_dummy_load_patch()
    llm = LLM(model=str(path), dtype="float32", load_format="dummy", max_model_len=256, enforce_eager=True,
              kv_cache_memory_bytes=64 * 1024 * 1024, limit_mm_per_prompt={"image": 1, "video": 0})
    try:
        norms = llm.apply_model(lambda model: {name: buffer.detach().clone() for name, buffer
                                               in patches.persistent_buffers(model).items() if ".input_norm." in name})
    finally:
        del llm
    weight, bias = expected_norm()
    assert set(norms[0]) == {"visual.input_norm.weight", "visual.input_norm.bias"}
    torch.testing.assert_close(norms[0]["visual.input_norm.weight"], weight)
    torch.testing.assert_close(norms[0]["visual.input_norm.bias"], bias)

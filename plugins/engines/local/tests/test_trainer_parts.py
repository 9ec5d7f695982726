"""The staged trainer's parts on their own: the eval's RNG scope (CPU, and CUDA where there is one),
the one model-path check, the optimizer schedule and its non-finite guard, the SFT batch order, and
the engine config (each setting declared once, with a description)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from vista_plugin_local.config import LocalEngineConfig, LocalSection, LoraSection, validate_engine_config
from vista_plugin_local.evaluate import evaluate
from vista_plugin_local.optim import Optimization, lr_factor
from vista_plugin_local.policy import MODEL_ADVICE, check_model_dir
from vista_plugin_local.sft_stage import batch_indices
from vista_plugin_local.trainer import LocalEngine

import vista_rl
from tests.engine_helpers import ODDSHAPE, run_config
from vista_rl import ConfigError, SamplingParams
from vista_rl.rollout import RolloutEngine, episode_specs


def _oracle_eval() -> None:
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle")) as engine:
        result = evaluate(engine, episode_specs(ODDSHAPE["id"], [0, 1], 1, ODDSHAPE["config"]),
                          SamplingParams(temperature=0.0), "oracle", seed=123)
    assert result.episodes == 2 and result.success.value == 1.0


def test_an_eval_leaves_the_cpu_rng_where_it_was() -> None:
    torch.manual_seed(7)
    torch.rand(3)
    before = torch.get_rng_state()
    _oracle_eval()  # reseeds with 123 inside: without its own RNG scope the state would move
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_eval_leaves_the_cuda_rng_where_it_was() -> None:
    torch.cuda.manual_seed_all(7)
    torch.rand(3, device="cuda")
    before = torch.cuda.get_rng_state_all()
    _oracle_eval()
    assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), before, strict=True))


def test_every_model_path_problem_gets_the_same_advice(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for path, problem in ((None, "needs a model directory"), (str(tmp_path / "nope"), "is not a directory"),
                          (str(tmp_path / "empty"), "has no config.json")):
        with pytest.raises(ConfigError, match="model.path") as caught:
            check_model_dir(path)
        assert problem in str(caught.value) and str(caught.value).endswith(MODEL_ADVICE)
    # validate (before training) and run (loading the model) say the same thing
    run = run_config(tmp_path / "nope", tmp_path / "run")
    messages = []
    for call in (LocalEngine(run).validate, LocalEngine(run).run):
        with pytest.raises(ConfigError) as caught:
            call()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and MODEL_ADVICE in messages[0]


def test_the_schedule_warms_up_then_decays() -> None:
    linear, cosine, constant = (lr_factor(10, 2, name) for name in ("linear", "cosine", "constant"))
    assert [linear(step) for step in (0, 1, 2, 6, 10)] == [0.5, 1.0, 1.0, 0.5, 0.0]
    assert cosine(2) == 1.0 and cosine(6) == pytest.approx(0.5) and cosine(10) == pytest.approx(0.0)
    assert {constant(step) for step in range(2, 12)} == {1.0}


def test_a_non_finite_step_moves_nothing_and_a_restored_optimizer_continues_the_schedule() -> None:
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.ones(3))
    optimization = Optimization([weight], 0.1, betas=(0.9, 0.999), weight_decay=0.0, total_steps=4,
                                schedule="linear")
    (weight * torch.tensor([1.0, math.inf, 0.0])).sum().backward()
    norm, finite = optimization.step(1.0, 1.0)
    assert not finite and not math.isfinite(norm) and weight.grad is None
    assert torch.equal(weight.detach(), torch.ones(3)) and optimization.lr == 0.1
    weight.sum().backward()
    assert optimization.step(1.0, 3.0)[1] and not torch.equal(weight.detach(), torch.ones(3))
    restored = Optimization([torch.nn.Parameter(weight.detach().clone())], 0.1, betas=(0.9, 0.999),
                            weight_decay=0.0, total_steps=4, schedule="linear")
    restored.load(optimization.state())
    assert restored.lr == optimization.lr == pytest.approx(0.075)


def test_sft_epochs_visit_every_example_once_in_a_seeded_order() -> None:
    steps = [batch_indices(3, 10, 4, step) for step in range(6)]  # two epochs of 4 + 4 + 2
    assert [len(batch) for batch in steps] == [4, 4, 2, 4, 4, 2]
    assert sorted(sum(steps[:3], [])) == sorted(sum(steps[3:], [])) == list(range(10))
    assert steps[:3] != steps[3:] and steps == [batch_indices(3, 10, 4, step) for step in range(6)]


def test_each_local_setting_is_declared_once_with_a_description(tmp_path: Path) -> None:
    for section in (LocalSection, LoraSection, LocalEngineConfig):
        undocumented = [name for name, info in section.model_fields.items() if not info.description]
        assert not undocumented, f"{section.__name__}: {undocumented}"
    neutral = {name for name in LocalEngineConfig.model_fields if name != "local"}
    run = run_config(tmp_path, tmp_path / "run")
    view = validate_engine_config(run)
    for name in neutral:  # the run's own sections, not copies with extra fields
        assert getattr(view, name) is getattr(run, name)
        assert not set(LocalSection.model_fields) & set(type(getattr(view, name)).model_fields)

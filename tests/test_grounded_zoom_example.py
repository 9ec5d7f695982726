"""The grounded-reasoning job's config (examples/grounded_zoom.yaml) trains end to end at tiny sizes,
and its harness (scripts/demo_grounded.py) scores the model with the zoom disabled: the tool
refuses, while the env, its prompt and the model's calls stay the same."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

from vista_rl.config import RunConfig, load_config

pytest.importorskip("transformers")
pytest.importorskip("vista_plugin_grounding.spot")
from vista_plugin_local.trainer import LocalEngine  # noqa: E402 - after the skip: needs torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "grounded_zoom.yaml"


def _harness() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports the tool job's harness, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("demo_grounded", ROOT / "scripts" / "demo_grounded.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def _tiny_example(model_dir: Path, out: Path) -> RunConfig:
    return load_config(RunConfig, EXAMPLE, overrides=[
        f"model.path={model_dir}", f"output_dir={out}", "rollout.group_size=2", "rollout.batch_size=4",
        "sft.steps=2", "sft.batch_size=2", "sft.seeds.count=3", "trainer.steps=1", "trainer.seeds_per_step=2",
        "trainer.micro_batch_size=4", "trainer.train_seeds.count=40", "eval.seeds.count=2",
        "rollout.sampling.max_tokens=16"])


def test_the_zoom_disabled_eval_refuses_the_oracle_s_call(tmp_path: Path) -> None:
    harness = _harness()
    run = load_config(RunConfig, EXAMPLE, overrides=[f"output_dir={tmp_path}", "eval.seeds.count=3"])
    rows = {}
    for name, disabled in (("on", False), ("off", True)):
        config = harness.eval_config(run, tmp_path / name, backend="scripted", path="oracle", tools=True,
                                     temperature=0.0)
        rows[name] = harness.evaluate(Console(quiet=True), name, harness.zoom_disabled(config) if disabled
                                      else config)
    on, off = ((tmp_path / name / "trajectories.jsonl").read_text() for name in ("on", "off"))
    assert rows["on"].tool_calls == rows["off"].tool_calls == 1.0  # the same calls, the same prompt
    assert "The zoom is disabled" in off and "The zoom is disabled" not in on
    assert json.loads(on.splitlines()[0])["system_prompt"] == json.loads(off.splitlines()[0])["system_prompt"]


@pytest.mark.slow
def test_the_example_config_trains_end_to_end_and_the_harness_prints_its_rows(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    run = _tiny_example(tiny_model_dir, tmp_path / "run")
    assert run.env.config["tools"] == ["search_coordinate"] and run.rollout.tools["search_coordinate"].config
    results = LocalEngine(run).run()
    assert {"sft", "rl"} <= set(results["evals"])
    status = _harness().main([str(tmp_path / "run"), "--no-sampled", "--no-plateau"])
    summary = json.loads((tmp_path / "run" / "demo_grounded.json").read_text())
    assert status == (0 if summary["verdict"] else 1)
    assert {"sft", "rl", "rl_off", "blind"} <= set(summary["rows"])
    assert summary["best_constant_answer"] in ("red", "green", "blue", "orange")

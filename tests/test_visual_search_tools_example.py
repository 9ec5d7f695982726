"""The tool-use main job's config (examples/visual_search_tools.yaml) trains end to end at tiny sizes,
the zoom reaches the model, and the demo harness scores the same model with the tool disabled.

(That tool results reach the model *in RL rollouts* and are masked from the loss is pinned by
tests/test_engine_rollout.py; here the example config and the tools-disabled switch are checked.)
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vista_rl.config import RunConfig, load_config

pytest.importorskip("transformers")
pytest.importorskip("vista_plugin_visual_search.small")
from vista_plugin_local.trainer import LocalEngine  # noqa: E402 - after the skip: needs torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "visual_search_tools.yaml"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_tools", ROOT / "scripts" / "demo_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _tiny_example(model_dir: Path, out: Path) -> RunConfig:
    return load_config(RunConfig, EXAMPLE, overrides=[
        f"model.path={model_dir}", f"output_dir={out}", "rollout.group_size=2",
        "sft.steps=2", "sft.batch_size=2", "sft.seeds.count=3",
        "trainer.steps=1", "trainer.seeds_per_step=2",
        "trainer.micro_batch_size=4",
        "eval.seeds.count=2", "rollout.batch_size=4",
        "env.config.teacher=oracle"])  # every SFT seed succeeds (the example's first_column teacher fails some)


def test_the_example_config_trains_end_to_end_and_the_harness_scores_tools_disabled(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    run = _tiny_example(tiny_model_dir, tmp_path / "run")
    assert run.env.config["tools"] == ["crop_zoom"] and run.rollout.describe_tools is False
    engine = LocalEngine(run)
    examples: list[Any] = []
    original = engine._sft_examples

    def keep_examples() -> list[Any]:
        examples.extend(original())
        return examples

    engine._sft_examples = keep_examples  # type: ignore[method-assign]
    results = engine.run()
    assert set(results["evals"]) == {"untrained", "sft", "rl"}
    rl_rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
               if json.loads(line).get("stage") == "rl"]
    assert len(rl_rows) == 1 and rl_rows[0]["trained_episodes"] == 4 and rl_rows[0]["optimizer_steps"] >= 1

    # The zoom reaches the model: with window_size 0 each oracle turn is its own SFT example, the call
    # turn with the view, the answer turn with the zoomed crop alone (as many image tokens as the crop
    # at the example's zoom_size needs, the tool result untrained).
    encoder = engine.policy.encoder
    size = run.env.config["zoom_size"]
    assert run.rollout.per_turn_sequences and len(examples) == 2 * 3
    for call, answer in zip(examples[::2], examples[1::2], strict=True):
        (view,) = (encoder.vision_tokens(image) for image in call.images)
        (crop,) = (encoder.vision_tokens(image) for image in answer.images)
        assert view == (run.env.config["display_size"] // 28) ** 2 and crop == (size // 28) ** 2
        trained = [token for token, mask in zip(call.input_ids, call.loss_mask, strict=True) if mask]
        assert "crop_zoom" in encoder.tokenizer.decode(trained)
        prompt_end = answer.loss_mask.index(1)
        assert answer.input_ids[:prompt_end].count(encoder.image_token_id) == crop
        assert "Zoomed view of image 0" in encoder.tokenizer.decode(answer.input_ids[:prompt_end])

    # The harness: the RL model with the tool disabled, and the best constant answer, on the held-out seeds.
    status = _harness().main([str(tmp_path / "run"), "--no-sampled", "--no-plateau"])
    summary = json.loads((tmp_path / "run" / "demo_tools.json").read_text())
    assert status == 1 and summary["verdict"] is False  # no sampled rows: the verdict cannot pass
    rows = summary["rows"]
    assert {"untrained", "sft", "rl", "rl_off", "blind", "rl_viewer", "teacher"} <= set(rows)
    assert rows["teacher"]["success"]["value"] == 1.0  # the oracle, set above
    shared = json.loads((tmp_path / "run" / "job_summary.json").read_text())
    assert shared["job"] == "tools" and shared["verdict"]["passed"] is False
    assert shared["judged"]["RL"] is None and "teacher: teacher 'oracle' (scripted)" in shared["judged"]
    assert rows["rl_off"]["tool_calls"] == 0 and rows["blind"]["tool_calls"] == 0
    off = [json.loads(line) for line in
           (Path(rows["rl_off"]["where"]) / "trajectories.jsonl").read_text().splitlines()]
    on = [json.loads(line) for line in
          (Path(rows["rl_viewer"]["where"]) / "trajectories.jsonl").read_text().splitlines()]
    assert len(off) == len(on) == 2 and [t["seed"] for t in off] == [t["seed"] for t in on]
    assert all("crop_zoom" not in t["system_prompt"] for t in off)
    assert all("crop_zoom" in t["system_prompt"] for t in on)
    assert (Path(rows["rl_viewer"]["where"]) / "trajectories.html").is_file()
    blind = summary["best_constant_answer"]
    assert blind in run.env.config.get("colours", ["red", "green", "blue", "orange"])


def test_the_verdict_is_on_sampled_success_against_every_rival() -> None:
    from rich.console import Console

    harness = _harness()

    def row(label: str, low: float, high: float) -> Any:
        return harness.Row(label, {"value": (low + high) / 2, "ci95_low": low, "ci95_high": high, "n": 200})

    rows = {"rl_sampled": row("RL (sampled)", 0.6, 0.8), "rl": row("RL (greedy)", 0.9, 1.0),
            "teacher": row("teacher", 0.4, 0.55), "sft_sampled": row("SFT 1x", 0.3, 0.5),
            "sft_2x_sampled": row("SFT 2x", 0.3, 0.5), "sft_4x_sampled": row("SFT 4x", 0.4, 0.59),
            "blind": row("blind", 0.2, 0.3), "rl_off_sampled": row("off", 0.0, 0.1)}
    verdict, rl, rivals = harness.print_verdict(Console(quiet=True), rows, "rl_off_sampled")
    assert verdict.passed and rl is not None and rl.low == 0.6 and len(rivals) == 6
    rows["sft_4x_sampled"] = row("SFT 4x", 0.5, 0.65)  # SFT trained 4x as long is within RL's CI
    verdict, _, _ = harness.print_verdict(Console(quiet=True), rows, "rl_off_sampled")
    assert not verdict.passed and "SFT 4x" in verdict.line()
    del rows["rl_off_sampled"]  # a missing ablation row fails
    assert not harness.print_verdict(Console(quiet=True), rows, "rl_off_sampled")[0].passed

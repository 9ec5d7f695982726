"""examples/svg_grpo.yaml trains end to end at tiny sizes on the local engine: SFT on oracle SVG,
then one GRPO step whose rollouts go through the SVG env (render fed back, per-turn rewards)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from vista_rl.cli import build_cli

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "svg_grpo.yaml"


def test_the_example_config_trains_a_step(tmp_path: Path, tiny_model_dir: Path) -> None:
    pytest.importorskip("torch")
    overrides = [f"model.path={tiny_model_dir}", f"output_dir={tmp_path / 'run'}", "env.config.image_size=28",
                 "rollout.group_size=2", "rollout.batch_size=4", "rollout.sampling.max_tokens=24",
                 "sft.steps=1", "sft.batch_size=2", "sft.seeds.count=2",
                 "trainer.steps=1", "trainer.seeds_per_step=2", "trainer.micro_batch_size=4", "eval.seeds.count=2"]
    args = ["train", str(EXAMPLE)] + [part for override in overrides for part in ("--set", override)]
    result = CliRunner().invoke(build_cli(), args)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "completed"
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rl = [row for row in rows if row.get("stage") == "rl"]
    assert len(rl) == 1 and rl[0]["trained_episodes"] == 4 and rl[0]["optimizer_steps"] >= 1
    assert rl[0]["env_errors"] == 0 and rl[0]["turns_mean"] == 2.0  # every episode ran VAGEN's two turns

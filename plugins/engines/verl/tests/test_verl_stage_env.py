"""verl's SFT trainer logs under the run directory: its ``torchrun`` launch gets the tracker settings
(``VERL_FILE_LOGGER_PATH``, ``TENSORBOARD_DIR``, ...) that RL's Ray runtime env carries, so its ``file``
logger no longer writes ``vista/EXPERIMENT.jsonl`` into whatever directory ``vista train`` ran from."""

from __future__ import annotations

import shlex
from pathlib import Path

from vista_plugin_verl.engine import VerlEngine
from vista_plugin_verl.loggers import VERL_METRICS_FILE

from vista_rl.config import RunConfig


def test_the_sft_stage_logs_under_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run dir"  # a space: the recorded shell line must still parse
    run = RunConfig.model_validate({
        "engine": "verl", "output_dir": str(run_dir), "env": {"id": "oddshape/odd-colour-v0"}, "model": {"path": "m"},
        "sft": {"steps": 2}, "trainer": {"steps": 1, "loggers": ["jsonl", "tensorboard"]},
        "eval": {"seeds": {"start": 100_000, "count": 8}},
    })
    stages = {stage.name: stage for stage in VerlEngine(run).stages(flash_attn=True)}
    env = stages["sft"].env
    assert Path(env["VERL_FILE_LOGGER_PATH"]) == run_dir.resolve() / "sft" / VERL_METRICS_FILE
    assert Path(env["TENSORBOARD_DIR"]).is_relative_to(run_dir.resolve() / "sft")
    words = shlex.split(stages["sft"].shell())
    assignments = dict(word.split("=", 1) for word in words[:len(env)])
    assert assignments == env and words[len(env):] == stages["sft"].command
    assert stages["rl"].env == {}  # RL's trackers get theirs through Ray's runtime env (config.py)

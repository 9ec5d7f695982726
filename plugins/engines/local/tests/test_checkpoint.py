"""Checkpoints are data (issue 22, item 3): a pickle in a shared or downloaded run directory must
never run code on `vista train --resume`, and the safetensors + JSON format still resumes exactly."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from vista_plugin_local.checkpoint import (
    CheckpointFormatError,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)

from vista_rl.cli import main


class _Payload:
    """What an attacker leaves in a run directory: unpickling it runs a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def _pickle_run(tmp_path: Path) -> tuple[Path, Path]:
    run, marker = tmp_path / "run", tmp_path / "pwned"
    step = run / "checkpoints" / "step-000001"
    step.mkdir(parents=True)
    torch.save({"engine": _Payload(marker)}, step / "state.pt")
    return run, marker


def test_a_pickle_checkpoint_is_refused_and_never_runs(tmp_path: Path) -> None:
    run, marker = _pickle_run(tmp_path)
    with pytest.raises(CheckpointFormatError, match=r"step-000001/state\.pt is a pickle checkpoint.*does not load"):
        load_checkpoint(run)
    assert not marker.exists()


def test_vista_train_resume_refuses_the_pickle(tmp_path: Path, tiny_model_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    run, marker = _pickle_run(tmp_path)
    (run / "config.yaml").write_text(yaml.safe_dump({
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2}},
        "model": {"path": str(tiny_model_dir)}, "output_dir": str(run),
        "engine_config": {"local": {"device": "cpu"}}}))
    with pytest.raises(SystemExit) as exited:
        main(["train", "--resume", str(run)])
    assert exited.value.code != 0
    captured = capsys.readouterr()
    assert "state.pt is a pickle checkpoint" in captured.out + captured.err
    assert not marker.exists()


@pytest.mark.parametrize("document", [
    {"state": {}},                                                        # no format marker
    {"format": "vista-checkpoint", "version": 99, "state": {}},           # a future format
    {"format": "vista-checkpoint", "version": 1, "state": {"w": {"$tensor": "missing"}}},
    {"format": "vista-checkpoint", "version": 1, "state": {"x": {"$pickle": "gASV"}}},
    {"format": "vista-checkpoint", "version": 1,
     "state": {"a": {"$ndarray": {"dtype": "|O", "shape": [1], "data": [1]}}}},
])
def test_foreign_or_damaged_checkpoints_are_refused(tmp_path: Path, document: dict[str, object]) -> None:
    save_checkpoint(tmp_path, "step-000001", {"w": torch.ones(2)}, keep=2)
    (tmp_path / "checkpoints" / "step-000001" / "state.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointFormatError, match="state.json"):
        load_checkpoint(tmp_path)


def test_save_then_load_gives_back_every_piece_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight  # tied weights share memory, as tied embeddings do
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    model(torch.tensor([1, 2])).sum().backward()
    optimizer.step()
    scheduler.step()
    random.seed(3)
    np.random.seed(4)
    state = {"engine": {"stage": "rl", "sft_step": 2, "rl_step": 1, "nan_steps": [2], "evals": {"sft": {"s": 0.5}}},
             "policy": {"model": model.state_dict(), "half": torch.arange(4, dtype=torch.bfloat16)},
             "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng_state(),
             "odd": {"$not-a-marker": 1, 7: (1.5, float("inf"), None)}}
    path = save_checkpoint(tmp_path, "step-000003", state, keep=2)
    assert sorted(p.name for p in path.iterdir()) == ["state.json", "tensors.safetensors"]
    expected_draws = (random.random(), np.random.rand(), torch.rand(1))

    loaded = load_checkpoint(tmp_path)
    assert loaded["engine"] == state["engine"] and loaded["scheduler"] == state["scheduler"]
    assert loaded["odd"] == state["odd"]
    for key, tensor in state["policy"]["model"].items():
        assert torch.equal(loaded["policy"]["model"][key], tensor), key
    assert loaded["policy"]["half"].dtype == torch.bfloat16
    restored = torch.optim.AdamW(model.parameters(), lr=0.1)
    restored.load_state_dict(loaded["optimizer"])
    assert restored.state_dict()["param_groups"] == optimizer.state_dict()["param_groups"]
    for index, moments in optimizer.state_dict()["state"].items():
        for name, value in moments.items():
            assert torch.equal(loaded["optimizer"]["state"][index][name], value), (index, name)
    set_rng_state(loaded["rng"])
    draws = (random.random(), np.random.rand(), torch.rand(1))
    assert draws[:2] == expected_draws[:2] and torch.equal(draws[2], expected_draws[2])


def test_a_truncated_tensor_file_is_a_full_disk_and_the_previous_checkpoint_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """safetensors can drop a failed final flush silently; the save must notice the short file."""
    import vista_plugin_local.checkpoint as checkpoint

    first = save_checkpoint(tmp_path, "step-000001", {"w": torch.ones(64)}, keep=2)
    real_save = checkpoint.save_file

    def save_then_lose_the_tail(tensors: object, path: str, metadata: object = None) -> None:
        real_save(tensors, path, metadata=metadata)
        os.truncate(path, os.path.getsize(path) - 100)

    monkeypatch.setattr(checkpoint, "save_file", save_then_lose_the_tail)
    with pytest.raises(checkpoint.DiskFullError, match="step-000001 is intact"):
        save_checkpoint(tmp_path, "step-000002", {"w": torch.zeros(64)}, keep=2)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [first.name]
    assert torch.equal(load_checkpoint(tmp_path)["w"], torch.ones(64))

"""The local engine's encoder shows recorded images (the SFT stage's oracle trajectories, which the episode
driver never resized) at ``rollout.image_size``, the size every rollout shows the model.

With the size set only as ``rollout.image_size`` (the examples since the old key
``engine_config.local.image_size`` was deprecated), the policy's encoder used to get no size: the SFT stage
trained on the env's 112x112 maps (16 vision tokens each) while RL and every evaluation showed 28x28 ones
(1 token), and the main job's RL started from a policy that could not read its map (docs/cluster.md
section 7: 0.18 training reward against 0.42)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from PIL import Image  # noqa: E402
from rich.console import Console  # noqa: E402
from vista_plugin_local.trainer import LocalEngine, build_policy  # noqa: E402

from tests.engine_helpers import FROZENLAKE, run_config  # noqa: E402


def test_recorded_images_are_encoded_at_rollout_image_size(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = run_config(tiny_model_dir, tmp_path / "run", env=FROZENLAKE, overrides=("rollout.image_size=28",))
    assert "image_size" not in run.engine_config.get("local", {})
    policy = build_policy(run, LocalEngine(run, console=Console(file=io.StringIO())).config, torch.device("cpu"))
    assert policy.encoder.image_size == 28
    recorded = Image.new("RGB", (112, 112), (20, 40, 200))
    recorded.paste((200, 40, 20), (0, 0, 56, 56))
    shown = recorded.resize((28, 28), Image.Resampling.BOX)  # what the episode driver shows (rollout.image_size)
    ids, vision = policy.encoder.message_segment("user", "<image>", [recorded])
    ids_shown, vision_shown = policy.encoder.message_segment("user", "<image>", [shown])
    assert ids == ids_shown
    torch.testing.assert_close(vision[0].pixel_values, vision_shown[0].pixel_values)
